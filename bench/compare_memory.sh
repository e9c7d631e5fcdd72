#!/usr/bin/env bash
# Peak resident memory of a training run, side by side in one run: ddl-train
# and its peers (bench/keras_fashion_mnist.py, bench/torch_fashion_mnist.py
# from bench/.venv-peers) each train mnist_cnn, then resnet_small, on
# Fashion-MNIST with the same recipe (batch 128, Adadelta, the whole
# training set, the test set evaluated after each epoch) and the same thread
# count, one after the other. GNU time's maximum resident set size is each
# process's peak: the program, its libraries, the data and the training.
# PyTorch runs twice: with glibc's default malloc, and with the malloc
# settings its speed comparisons use (keeping freed memory, which costs
# resident memory; bench/torch_cnn_step.py says why).
#
#   bench/compare_memory.sh [build-dir] [threads] [epochs]
# Defaults: build, 2 threads, 1 epoch (about 10 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${2:-2}
epochs=${3:-1}
venv=bench/.venv-peers/bin/python3
tunables=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
[[ -x $venv ]] || { echo "compare_memory: no $venv (run bench/install-peers.sh)" >&2; exit 2; }
[[ -x $build/apps/ddl-train ]] || { echo "compare_memory: no $build/apps/ddl-train (build first)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "compare_memory: no GNU time (apt-get install time)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure NAME COMMAND...: runs the command under GNU time; its peak
# resident set (MiB) and wall time (s) go to $work/NAME.result.
measure() {
  local name=$1
  shift
  echo "compare_memory: $name" >&2
  /usr/bin/time -o "$work/$name.time" -f "%M %e" "$@" > "$work/$name.log" 2>&1 ||
    { tail "$work/$name.log" >&2; exit 1; }
  awk '{ printf "%.0f %.0f\n", $1 / 1024, $2 }' "$work/$name.time" > "$work/$name.result"
}

recipe=(--threads "$threads" --epochs "$epochs" --seed 1)
echo "| model | ddl MiB (s) | Keras 3 MiB (s) | PyTorch 2 MiB (s) | PyTorch 2, malloc kept, MiB (s) | ddl vs the lowest peer |"
echo "| --- | --- | --- | --- | --- | --- |"
for model in mnist_cnn resnet_small; do
  measure "ddl-$model" "$build/apps/ddl-train" --model "$model" "${recipe[@]}"
  TF_CPP_MIN_LOG_LEVEL=2 measure "keras-$model" "$venv" bench/keras_fashion_mnist.py --model "$model" "${recipe[@]}"
  measure "torch-$model" "$venv" bench/torch_fashion_mnist.py --model "$model" --channels-last "${recipe[@]}"
  GLIBC_TUNABLES=$tunables measure "torch-tuned-$model" "$venv" bench/torch_fashion_mnist.py --model "$model" \
    --channels-last "${recipe[@]}"
  read -r ddl ddl_s < "$work/ddl-$model.result"
  read -r keras keras_s < "$work/keras-$model.result"
  read -r torch torch_s < "$work/torch-$model.result"
  read -r tuned tuned_s < "$work/torch-tuned-$model.result"
  lowest=$(printf '%s\n' "$keras" "$torch" "$tuned" | sort -n | head -1)
  echo "| $model | $ddl ($ddl_s) | $keras ($keras_s) | $torch ($torch_s) | $tuned ($tuned_s) |" \
    "$(awk -v d="$ddl" -v l="$lowest" 'BEGIN { printf "%.2fx", d / l }') |"
done
