#!/usr/bin/env bash
# Data-parallel efficiency, side by side in one run: ddl-train's mnist_cnn
# on Fashion-MNIST, 1 thread per rank, as 1 rank and as 2 ranks (ring
# allreduce, with and without overlap of communication and backward),
# alternating `rounds` times so all see the same machine load. Prints the
# training samples/s of each run, the share of step time spent waiting on
# gradient synchronisation, and the 2-rank throughput as a fraction of twice
# the 1-rank throughput (the scaling efficiency).
#
#   bench/data_parallel_scaling.sh [build-dir] [rounds] [samples]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-2}
samples=${3:-12800}
train=("$build"/apps/ddl-train --model mnist_cnn --threads 1 --epochs 1 --no-validation --train-limit "$samples"
  --test-limit 1000)

rate() { sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' | tail -n 1; }
waiting() { sed -n 's/gradient synchronisation: \([0-9.]*\)%.*/\1/p'; }

one=() two=() two_flat=() wait_on=() wait_off=()
for ((r = 0; r < rounds; r++)); do
  one+=("$("${train[@]}" | rate)")
  out=$(mpiexec -n 2 "${train[@]}" --parallel data)
  two+=("$(rate <<< "$out")") wait_on+=("$(waiting <<< "$out")")
  out=$(mpiexec -n 2 "${train[@]}" --parallel data --no-overlap)
  two_flat+=("$(rate <<< "$out")") wait_off+=("$(waiting <<< "$out")")
done
python3 - "${one[*]}" "${two[*]}" "${two_flat[*]}" "${wait_on[*]}" "${wait_off[*]}" <<'PY'
import statistics, sys
one, two, flat, won, woff = ([float(x) for x in arg.split()] for arg in sys.argv[1:])
m1, m2, mf = statistics.median(one), statistics.median(two), statistics.median(flat)
print(f"1 rank x 1 thread:            {one} samples/s, median {m1:.0f}")
print(f"2 ranks, overlap on:          {two} samples/s, median {m2:.0f}; waiting {won} % of step time")
print(f"2 ranks, overlap off:         {flat} samples/s, median {mf:.0f}; waiting {woff} % of step time")
print(f"efficiency (2-rank / 2 x 1-rank): overlap on {m2 / (2 * m1):.1%}, overlap off {mf / (2 * m1):.1%}")
PY
