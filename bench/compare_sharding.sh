#!/usr/bin/env bash
# Sharded data parallelism side by side: wide_mlp (104 M parameters) with
# Adam, one process, then `ranks` (2) ranks x 1 thread unsharded (ZeRO stage 0) and
# at stages 1, 2 and 3 (--shard optimizer, gradients, parameters; all with
# --overlap off, and stage 3 again with --overlap on: its prefetch), at
# global batch 128, in `rounds` interleaved rounds so every configuration
# sees the same machine load. Per configuration: the median samples/s, each
# rank's peak resident set (GNU time's maximum RSS; the median over the
# rounds of the larger rank's), and the training state ddl-train's report
# says rank 0 holds beside ZeRO's formula. Where bench/install-peers.sh has
# made the peers' environment, PyTorch's counterparts run in the same
# rounds (bench/torch_fsdp.py, the same ranks x 1 thread, gloo, the same model,
# optimizer and batch on random data, the same number of steps, its rate
# over all of them as ddl-train's epoch counts it): DDP, DDP with
# ZeroRedundancyOptimizer (stage 1), FSDP2 without and with resharding
# after forward (stages 2 and 3; FSDP2 prefetches by default).
#
# `ranks` (default 2) sets the data-parallel ranks of every configuration
# but the one process; past the machine's cores they share them, and only
# the memory columns mean anything.
#
#   bench/compare_sharding.sh [build-dir] [rounds] [train-limit] [ranks]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=compare_lib.sh source-path=SCRIPTDIR
source bench/compare_lib.sh
compare_start compare_sharding "$@"

common=(--model wide_mlp --optimizer adam --batch-size 128 --epochs 1 --train-limit "$limit" --test-limit 128
  --threads 1 --no-validation)
configs=(one none optimizer gradients parameters parameters+prefetch)
torch_configs=(torch-ddp torch-zero1 torch-fsdp2-grad torch-fsdp2)
if [[ -x $python ]]; then
  configs+=("${torch_configs[@]}")
else
  echo "compare_sharding: no $python (bench/install-peers.sh): ddl alone" >&2
fi
torch_stage() { case $1 in torch-ddp) echo 0 ;; torch-zero1) echo 1 ;; torch-fsdp2-grad) echo 2 ;; torch-fsdp2) echo 3 ;; esac; }

run() {  # run <config> <round>
  # Each process appends its peak to a file of its own (the ranks' shared
  # output could split the line).
  local config=$1 out="$work/$1.$2" rss="$work/rss.$1.$2"
  if [[ $config == torch-* ]]; then
    # Its warm-up step and the timed ones: ddl-train's steps; its ranks'
    # peaks in the form GNU time writes ddl's.
    "$python" bench/torch_fsdp.py --stage "$(torch_stage "$config")" --warmup 1 --steps $((limit / 128 - 1)) \
      --ranks "$ranks" > "$out" 2>&1 || return  # (run's caller turns set -e off)
    awk '/^RANK / { printf "maxrss %.0f\n", $4 * 1024 }' "$out" > "$rss"
  elif [[ $config == one ]]; then
    /usr/bin/time -a -o "$rss" -f "maxrss %M" "$train" "${common[@]}" > "$out" 2>&1
  else
    local overlap=off
    [[ $config == *+prefetch ]] && overlap=on
    mpiexec -n "$ranks" /usr/bin/time -a -o "$rss" -f "maxrss %M" "$train" "${common[@]}" --parallel data --shard "${config%+prefetch}" \
      --overlap "$overlap" > "$out" 2>&1
  fi
}

run_rounds compare_sharding "${configs[@]}"

printf "%-20s %10s %14s %11s %10s %10s %13s\n" "stage" "samples/s" "peak RSS MiB" "params MiB" "grads MiB" "optim MiB" "formula MiB"
for config in "${configs[@]}"; do
  rate=$(median_rate "$config")
  rss=$(median_rss "$config")
  last="$work/$config.$rounds"
  state=$(awk '/^training state per rank/ { table = 1 } table && $1 == "0" { print $2, $3, $4; exit }' "$last")
  formula=$(sed -n "s/^ZeRO's formula .*: \([0-9.]*\), \([0-9.]*\) and \([0-9.]*\) MiB$/\1+\2+\3/p" "$last")
  [[ -n $state ]] || state="- - -"
  [[ -n $formula ]] && formula=$(awk -v f="$formula" 'BEGIN { split(f, p, "+"); printf "%.0f", p[1] + p[2] + p[3] }')
  # shellcheck disable=SC2086 # three fields
  printf "%-20s %10s %14s %11s %10s %10s %13s\n" "$config" "$rate" "$rss" $state "${formula:--}"
done
