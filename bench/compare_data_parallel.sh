#!/usr/bin/env bash
# Data parallelism side by side: ddl (bench/data_parallel.cpp: DataParallel
# with ring and shm) and PyTorch 2's DistributedDataParallel over gloo
# (bench/torch_ddp_step.py), 2 ranks x 1 thread, the Keras MNIST CNN at
# global batch 128 with Adadelta. The two programs alternate `blocks` times,
# each block running `rounds` interleaved rounds of its own configurations
# (1 rank, no communication, data-parallel), so both see the same machine
# load. Prints each block's medians, then, over the blocks, each program's
# efficiency and ddl's data-parallel throughput against DDP's.
#
#   bench/compare_data_parallel.sh [build-dir] [blocks] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
blocks=${2:-3}
rounds=${3:-10}
venv=bench/.venv-peers/bin/python3
tunables=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
[[ -x $build/bench/ddl_bench_data_parallel ]] || {
  echo "compare_data_parallel: no $build/bench/ddl_bench_data_parallel (build first)" >&2
  exit 2
}
[[ -x $venv ]] || { echo "compare_data_parallel: no $venv (run bench/install-peers.sh)" >&2; exit 2; }

# Keeps "<program> <block> <config> <samples/s>" from a table's rows.
rows() {
  awk -v program="$1" -v block="$2" '/^(1 rank|no comm|ring|shm|ddp) / {
    name = $1; n = 2
    if ($1 == "1" || $1 == "no") { name = $1 "-" $2; n = 3 }
    print program, block, name, $n
  }'
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for ((b = 1; b <= blocks; b++)); do
  echo "## block $b of $blocks"
  out=$(mpiexec -n 2 "$build"/bench/ddl_bench_data_parallel --rounds "$rounds" --steps 5 --allreduce ring,shm)
  echo "$out"
  rows ddl "$b" <<< "$out" >> "$log"
  out=$(cd bench && GLIBC_TUNABLES=$tunables "$OLDPWD/$venv" torch_ddp_step.py --rounds "$rounds" --steps 5 \
          --channels-last)
  echo "$out"
  rows torch "$b" <<< "$out" >> "$log"
done
python3 - "$log" <<'EOF'
import collections, statistics, sys
rate = collections.defaultdict(dict)  # (program, config) -> block -> samples/s
for line in open(sys.argv[1]):
    program, block, config, samples = line.split()[:4]
    rate[(program, config)][block] = float(samples)
print("\n# over the blocks (medians); efficiency = data-parallel rate / (2 x the same program's 1-rank rate)")
for program, parallel in (("ddl", "ring"), ("ddl", "shm"), ("torch", "ddp")):
    ones, twos = rate[(program, "1-rank")], rate[(program, parallel)]
    ceiling = rate[(program, "no-comm")]
    eff = [twos[b] / (2 * ones[b]) for b in twos]
    top = [ceiling[b] / (2 * ones[b]) for b in ceiling]
    print(f"{program:6} {parallel:5} {statistics.median(twos.values()):7.0f} samples/s  efficiency "
          f"{statistics.median(eff):.1%} (no-communication ceiling {statistics.median(top):.1%})")
ddp = rate[("torch", "ddp")]
for parallel in ("ring", "shm"):
    ours = rate[("ddl", parallel)]
    ratios = [ours[b] / ddp[b] for b in ours]
    print(f"ddl {parallel} / DDP gloo throughput: {statistics.median(ratios):.2f}x "
          f"(blocks: {', '.join(f'{r:.2f}' for r in ratios)})")
EOF
