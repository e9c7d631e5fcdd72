#!/usr/bin/env bash
# What recording a timeline costs a training run: ddl-train on 2 ranks x 1
# thread (the Keras MNIST CNN, data-parallel, one epoch of a Fashion-MNIST
# slice, no validation) without --timeline, with it, and with
# --timeline-layers, in interleaved rounds so all three see the same machine
# load. Prints each run's samples/s, then each configuration's median and
# its ratio to the run without a timeline; first the cost of one span from
# ddl_bench_timeline.
#
#   bench/timeline_overhead.sh [build-dir] [rounds] [train-samples]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-5}
samples=${3:-8192}
for program in "$build/apps/ddl-train" "$build/bench/ddl_bench_timeline"; do
  [[ -x $program ]] || { echo "timeline_overhead: no $program (build first)" >&2; exit 2; }
done
"$build/bench/ddl_bench_timeline"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=(--parallel data --epochs 1 --train-limit "$samples" --no-validation --threads 1 --quiet)
declare -A rates
configs=(off on layers)
for ((r = 1; r <= rounds; r++)); do
  for config in "${configs[@]}"; do
    extra=()
    [[ $config == on ]] && extra=(--timeline "$work/trace.json")
    [[ $config == layers ]] && extra=(--timeline "$work/trace.json" --timeline-layers)
    rate=$(mpiexec -n 2 "$build/apps/ddl-train" "${args[@]}" "${extra[@]}" |
      sed -n 's/.* \([0-9][0-9]*\) samples\/s.*/\1/p')
    [[ -n $rate ]] || { echo "timeline_overhead: ddl-train printed no samples/s" >&2; exit 1; }
    echo "round $r $config $rate samples/s"
    rates[$config]+="$rate "
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
base=$(median <<< "${rates[off]}")
for config in "${configs[@]}"; do
  m=$(median <<< "${rates[$config]}")
  awk -v c="$config" -v m="$m" -v b="$base" 'BEGIN {printf "%-7s median %6.0f samples/s  %.3f of off\n", c, m, m / b}'
done
