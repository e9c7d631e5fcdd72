#!/usr/bin/env bash
# Before and after a change, side by side in one run: two builds of ddl (say
# one of the commit before, one of the change) alternate `rounds` times on
#   - the training step of bench/layers.cpp (MNIST CNN, batch 128; 1 and 2 threads),
#   - the 2-rank allreduce busbw of bench/allreduce.cpp (ring and MPI_Allreduce; 1, 8 and 64 MiB),
#   - the 2-rank data-parallel throughput of bench/data_parallel.cpp (ring, 1 thread per rank),
# and the medians are printed with the ratio new/old (for times below 1 is
# faster; for bandwidths and throughputs above 1 is faster).
#
#   bench/compare_builds.sh OLD_BUILD NEW_BUILD [rounds]
# Each build needs ddl_bench_layers, and with MPI ddl_bench_allreduce and
# ddl_bench_data_parallel.
set -euo pipefail
old=${1:?usage: bench/compare_builds.sh OLD_BUILD NEW_BUILD [rounds]}
new=${2:?usage: bench/compare_builds.sh OLD_BUILD NEW_BUILD [rounds]}
rounds=${3:-3}
results=$(mktemp)
trap 'rm -f "$results"' EXIT

measure() {  # measure <label> <build>: appends "label metric value" lines
  local label=$1 build=$2 threads
  for threads in 1 2; do
    "$build"/bench/ddl_bench_layers --threads "$threads" --reps 5 |
      awk -v l="$label" -v t="$threads" '/^training step/ {print l, "step_ms_" t "_threads", $4}'
  done
  if [[ -x "$build"/bench/ddl_bench_allreduce ]]; then
    for bytes in 1048576 8388608 67108864; do
      mpiexec -n 2 "$build"/bench/ddl_bench_allreduce --min-bytes "$bytes" --max-bytes "$bytes" \
        --algorithms ring,builtin --budget 0.5 |
        awk -v l="$label" -v b="$bytes" '$1 == b {print l, "busbw_ring_" b "B", $6; print l, "busbw_builtin_" b "B", $11}'
    done
    mpiexec -n 2 "$build"/bench/ddl_bench_data_parallel --allreduce ring --steps 5 --rounds 3 --threads 1 |
      awk -v l="$label" '$1 == "ring" {print l, "data_parallel_ring_samples_per_s", $2}'
  fi
}

for ((r = 0; r < rounds; r++)); do
  measure old "$old" >> "$results"
  measure new "$new" >> "$results"
done

python3 - "$results" <<'PY'
import collections, statistics, sys
values = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    label, metric, value = line.split()
    values[metric][label].append(float(value))
print(f"{'metric':32} {'old (median)':>14} {'new (median)':>14} {'new/old':>8}   all old | all new")
for metric, by_label in values.items():
    if not by_label["old"] or not by_label["new"]:  # a bench only one of the builds has
        print(f"{metric:32} only in the {'new' if by_label['new'] else 'old'} build")
        continue
    o, n = statistics.median(by_label["old"]), statistics.median(by_label["new"])
    print(f"{metric:32} {o:14.3f} {n:14.3f} {n / o:8.3f}   {by_label['old']} | {by_label['new']}")
PY
