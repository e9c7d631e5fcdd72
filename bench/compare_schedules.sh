#!/usr/bin/env bash
# The pipeline's schedules side by side: wide_mlp (104 M parameters) at
# global batch 128 with SGD, 2 stages x 1 thread (balanced by parameters),
# for M micro-batches in `micro` (default 2 4 8), under gpipe and 1f1b
# (weight gradients once per batch, the default), 1f1b with them per
# micro-batch, and zb-h1, in `rounds` interleaved rounds so every
# configuration sees the same machine load. Per configuration: the median
# samples/s, the measured bubble (the stages' mean idle share of a step)
# beside the schedule's formula, and each stage's peak activation MiB.
#
#   bench/compare_schedules.sh [build-dir] [rounds] [train-limit] [ranks] [micro...]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=compare_lib.sh source-path=SCRIPTDIR
source bench/compare_lib.sh
compare_start compare_schedules "$@"
shift $(($# < 4 ? $# : 4))
micro=("$@")
((${#micro[@]})) || micro=(2 4 8)

common=(--model wide_mlp --optimizer sgd --lr 0.01 --batch-size 128 --epochs 1 --train-limit "$limit" --test-limit 128
  --threads 1 --no-validation --parallel pipeline --balance parameters)
configs=()
for m in "${micro[@]}"; do configs+=("gpipe-$m" "1f1b-$m" "1f1b+w-$m" "zb-h1-$m"); done

run() {  # run <config> <round>
  local config=$1 out="$work/$1.$2" schedule=${1%-*} m=${1##*-} weights=batch
  [[ $schedule == 1f1b+w ]] && schedule=1f1b weights=micro-batch
  mpiexec -n "$ranks" /usr/bin/time -a -o "$work/rss.$1.$2" -f "maxrss %M" "$train" "${common[@]}" \
    --schedule "$schedule" --micro-batches "$m" --weight-gradients "$weights" > "$out" 2>&1
}

run_rounds compare_schedules "${configs[@]}"

printf "%-12s %10s %18s %18s %22s\n" "config" "samples/s" "bubble measured %" "bubble formula %" "activ. MiB per stage"
for config in "${configs[@]}"; do
  bubble=$(for f in "$work/$config".*; do sed -n 's/^bubble: \([0-9.]*\)% .*/\1/p' "$f"; done | median)
  formula=$(sed -n 's/^bubble: .* = \([0-9.]*\)% for .*/\1/p' "$work/$config.$rounds")
  activations=$(awk '/^pipeline stages/ { t = 1 } t && $2 ~ /-/ && NF == 9 { printf "%s%s", sep, $5; sep = " / " }' \
    "$work/$config.$rounds")
  printf "%-12s %10s %18s %18s %22s\n" "$config" "$(median_rate "$config")" "$bubble" "$formula" "$activations"
done
