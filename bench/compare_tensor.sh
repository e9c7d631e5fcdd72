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
# shellcheck source=compare_lib.sh source-path=SCRIPTDIR
source bench/compare_lib.sh
compare_start compare_tensor "$@"

common=(--model wide_mlp --batch-size 128 --epochs 1 --train-limit "$limit" --test-limit 128 --threads 1
  --no-validation)
configs=(one data tensor pipeline)
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

run_rounds compare_tensor "${configs[@]}"

printf "%-14s %10s %14s %16s\n" "config" "samples/s" "peak RSS MiB" "sent/step MiB"
for config in "${configs[@]}"; do
  rate=$(median_rate "$config")
  rss=$(median_rss "$config")
  last="$work/$config.$rounds"
  # Rank 0's row of the report, its last column (per training step): data
  # and tensor parallelism's per-rank table, the pipeline's stage 0 row
  # (the report's, after the header's stage table).
  case $config in
    data | tensor) sent=$(awk '$1 == "0" && NF >= 5 { v = $NF } END { print v }' "$last") ;;
    pipeline) sent=$(awk '$1 == "0" && $2 ~ /-/ { v = $NF } END { print v }' "$last") ;;
    *) sent=- ;;
  esac
  printf "%-14s %10s %14s %16s\n" "$config" "$rate" "$rss" "${sent:--}"
done
