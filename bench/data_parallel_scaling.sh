#!/usr/bin/env bash
# Data-parallel efficiency, side by side in one run: ddl-train's mnist_cnn
# on Fashion-MNIST, 1 thread per rank, alternating `rounds` times so every
# configuration sees the same machine load:
#   - 1 rank at the global batch;
#   - 2 independent 1-rank processes at once, each on half the samples at
#     half the batch (a data-parallel rank's work without any communication:
#     the ceiling the two cores, caches and memory bandwidth allow);
#   - 2 data-parallel ranks with each allreduce algorithm named, overlap on;
#   - 2 ranks with the first algorithm, overlap off.
# Prints samples/s (medians), the share of step time spent waiting on
# gradient synchronisation, and each 2-process throughput as a fraction of
# twice the 1-rank throughput (the scaling efficiency).
#
#   bench/data_parallel_scaling.sh [build-dir] [rounds] [samples] [algorithms]
#   e.g. bench/data_parallel_scaling.sh build 3 12800 "ring shm"
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-2}
samples=${3:-12800}
read -r -a algorithms <<< "${4:-ring shm}"
batch=128
train=("$build"/apps/ddl-train --model mnist_cnn --threads 1 --epochs 1 --no-validation --test-limit 1000)

rate() { sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' | tail -n 1; }
waiting() { sed -n 's/gradient synchronisation: \([0-9.]*\)%.*/\1/p'; }

declare -A rates waits
record() {  # record <name> <output>
  rates[$1]+="$(rate <<< "$2") "
  waits[$1]+="$(waiting <<< "$2") "
}
names=("1 rank" "2 processes, no communication")
for a in "${algorithms[@]}"; do names+=("2 ranks, $a"); done
names+=("2 ranks, ${algorithms[0]}, no overlap")

for ((r = 0; r < rounds; r++)); do
  record "1 rank" "$("${train[@]}" --train-limit "$samples" --batch-size "$batch")"
  half=("${train[@]}" --train-limit $((samples / 2)) --batch-size $((batch / 2)))
  pair=$( ("${half[@]}" | rate &) ; "${half[@]}" | rate; wait)
  rates["2 processes, no communication"]+="$(awk '{s += $1} END {print s}' <<< "$pair") "
  for a in "${algorithms[@]}"; do
    record "2 ranks, $a" "$(mpiexec -n 2 "${train[@]}" --train-limit "$samples" --batch-size "$batch" \
      --parallel data --allreduce "$a")"
  done
  record "2 ranks, ${algorithms[0]}, no overlap" "$(mpiexec -n 2 "${train[@]}" --train-limit "$samples" \
    --batch-size "$batch" --parallel data --allreduce "${algorithms[0]}" --no-overlap)"
done

for name in "${names[@]}"; do printf '%s\t%s\t%s\n' "$name" "${rates[$name]}" "${waits[$name]:-}"; done |
  python3 bench/efficiency_table.py
