#!/usr/bin/env bash
# Tensor parallelism side by side: wide_mlp (104 M parameters) at global
# batch 128 with Adadelta, one process (1 thread), then `ranks` (2) ranks x
# 1 thread with data, tensor and pipeline parallelism, in `rounds`
# interleaved rounds so every configuration sees the same machine load.
# Per configuration: the median samples/s, each rank's peak resident set
# (GNU time's maximum RSS; the median over the rounds of the larger rank's)
# and the bytes rank 0 sent per step as ddl-train's report counts them.
# Where bench/install-peers.sh has made the peers' environment, PyTorch's
# counterparts run in the same rounds (bench/torch_tensor_parallel.py: DDP,
# and ColwiseParallel/RowwiseParallel on the same pairs, the same ranks x 1
# thread, gloo, the same model, optimizer and batch on random data, its rate
# over all its steps as ddl-train's epoch counts them).
#
#   bench/compare_tensor.sh [build-dir] [rounds] [train-limit] [ranks]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
limit=${3:-768}
ranks=${4:-2}
train=$build/apps/ddl-train
[[ -x $train ]] || { echo "compare_tensor: no $train (build first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(--model wide_mlp --batch-size 128 --epochs 1 --train-limit "$limit" --test-limit 128 --threads 1
  --no-validation)
configs=(one data tensor pipeline)
python=bench/.venv-peers/bin/python3
if [[ -x $python ]]; then
  configs+=(torch-data torch-tensor)
else
  echo "compare_tensor: no $python (bench/install-peers.sh): ddl alone" >&2
fi

run() {  # run <config> <round>
  # Each process appends its peak to a file of its own (the ranks' shared
  # output could split the line).
  local config=$1 out="$work/$1.$2" rss="$work/rss.$1.$2"
  case $config in
    torch-*)
      "$python" bench/torch_tensor_parallel.py --mode "${config#torch-}" --warmup 1 --steps $((limit / 128 - 1)) \
        --ranks "$ranks" > "$out" 2>&1 || return
      awk '/^RANK / { printf "maxrss %.0f\n", $4 * 1024 }' "$out" > "$rss" ;;
    one) /usr/bin/time -a -o "$rss" -f "maxrss %M" "$train" "${common[@]}" > "$out" 2>&1 ;;
    *) mpiexec -n "$ranks" /usr/bin/time -a -o "$rss" -f "maxrss %M" "$train" "${common[@]}" --parallel "$config" \
         > "$out" 2>&1 ;;
  esac
}

for round in $(seq "$rounds"); do
  for config in "${configs[@]}"; do
    echo "compare_tensor: round $round, $config" >&2
    run "$config" "$round" || { cat "$work/$config.$round" >&2; exit 1; }
  done
done

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%-14s %10s %14s %16s\n" "config" "samples/s" "peak RSS MiB" "sent/step MiB"
for config in "${configs[@]}"; do
  rate=$(for f in "$work/$config".*; do
    if [[ $config == torch-* ]]; then
      sed -n 's/.*; all steps \([0-9.]*\)$/\1/p' "$f"
    else
      sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' "$f" | tail -1
    fi
  done | median)
  rss=$(for f in "$work/rss.$config".*; do awk '/^maxrss/ { if ($2 > m) m = $2 } END { printf "%.0f\n", m / 1024 }' "$f"; done | median)
  last="$work/$config.$rounds"
  # Rank 0's row of the report: data and tensor parallelism's last column
  # (per step); a pipeline's stage 0 row (the report's, after the header's
  # stage table) counts its whole run, over limit/128 steps.
  case $config in
    data | tensor) sent=$(awk '$1 == "0" && NF >= 5 { v = $NF } END { print v }' "$last") ;;
    pipeline) sent=$(awk '$1 == "0" && $2 ~ /-/ { v = $NF } END { print v }' "$last") ;;
    *) sent=- ;;
  esac
  printf "%-14s %10s %14s %16s\n" "$config" "$rate" "$rss" "${sent:--}"
done
