#!/usr/bin/env bash
# Data-parallel efficiency across simulated nodes (scripts/cluster/simulate.sh;
# root only), side by side in one run: each model trained with 1 thread per
# rank, alternating `rounds` times so every configuration sees the same
# machine load:
#   - 1 rank at the global batch;
#   - 2 ranks on one host (ring allreduce through shared memory);
#   - 2 ranks on 2 nodes, 1 each, the link between them limited to each rate,
#     over TCP (the ring; hierarchical is the same with a rank per node).
# Prints samples/s (medians), the share of step time spent waiting on the
# gradients, and the efficiency: each 2-rank throughput as a fraction of
# twice the 1-rank one. mnist_cnn (1.2 M parameters, 4.6 MiB of gradients,
# the global batch 128 split) and materials_mlp (154 k parameters, 0.6 MiB,
# 75 samples per rank): the seed thesis's case of a small network and much
# data.
#
#   bench/cluster_data_parallel.sh [build-dir] [rounds] [rates...]
#   e.g. bench/cluster_data_parallel.sh build 3 1gbit 10gbit
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
links=("$@")
[[ ${#links[@]} -gt 0 ]] || links=(1gbit 10gbit)
export DDL_STALL_TIMEOUT=${DDL_STALL_TIMEOUT:-15}  # bounds a finalize hung over TCP (docs/CLUSTER.md)

rate() { sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' | tail -n 1; }
waiting() { sed -n 's/gradient synchronisation: \([0-9.]*\)%.*/\1/p'; }

for model in mnist_cnn materials_mlp; do
  # mnist_cnn: the global batch 128, split over the ranks; materials_mlp:
  # 75 samples per rank, as the seed thesis trained it (weak scaling).
  case $model in
    mnist_cnn) train=("$build/apps/ddl-train" --model mnist_cnn --train-limit 6400) one=(--batch-size 128)
      two=(--batch-size 128) ;;
    materials_mlp) train=("$build/apps/ddl-train" --model materials_mlp) one=(--batch-size 75) two=(--batch-size 150) ;;
  esac
  train+=(--threads 1 --epochs 1 --no-validation --test-limit 500)
  unset rates waits
  declare -A rates=() waits=()
  names=("1 rank" "2 ranks, one host")
  for r in "${links[@]}"; do names+=("2 nodes at $r"); done
  for ((round = 0; round < rounds; round++)); do
    out=$("${train[@]}" "${one[@]}")
    rates["1 rank"]+="$(rate <<< "$out") "
    out=$(mpiexec -n 2 "${train[@]}" "${two[@]}" --parallel data --allreduce ring)
    rates["2 ranks, one host"]+="$(rate <<< "$out") "
    waits["2 ranks, one host"]+="$(waiting <<< "$out") "
    for r in "${links[@]}"; do
      out=$(scripts/cluster/simulate.sh --nodes 2 --ranks-per-node 1 --rate "$r" --between-nodes tcp -- \
        bash -c '"$DDL_CLUSTER_MPIEXEC" -n 2 "$@"' run "${train[@]}" "${two[@]}" --parallel data --allreduce ring 2>&1 || true)
      rates["2 nodes at $r"]+="$(rate <<< "$out") "
      waits["2 nodes at $r"]+="$(waiting <<< "$out") "
    done
  done
  echo "== $model"
  for name in "${names[@]}"; do printf '%s\t%s\t%s\n' "$name" "${rates[$name]}" "${waits[$name]:-}"; done |
    python3 bench/efficiency_table.py
done
