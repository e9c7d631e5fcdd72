#!/usr/bin/env bash
# Lesson 12: inside a node vs across nodes. Ranks on one node exchange
# through memory; ranks on different nodes through a network link many
# times slower. A flat ring treats every link alike: each of its 2(p-1)
# steps waits for the slow one, and nearly twice the message leaves each
# node. The hierarchical allreduce reduces inside each node first, lets one
# leader per node cross, and broadcasts back: fewer bytes and fewer steps on
# the slow link. Runs 2 simulated nodes x 2 ranks on this machine
# (scripts/cluster/simulate.sh; root only, skipped elsewhere) with the link
# between them limited to 1 Gbit/s (the full run adds 10 Gbit/s): every
# algorithm's time and the bytes that crossed the link, beside ddl-model's
# prediction from the alpha and beta it fits there per link type
# (docs/lessons/12-inside-and-across-nodes.md).
#
#   lessons/12-inside-and-across-nodes.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=12-inside-and-across-nodes
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/bench/ddl_bench_allreduce" "$build/apps/ddl-model" gnuplot
simulate=scripts/cluster/simulate.sh

max=$(scaled $((quick ? 16 << 20 : 64 << 20)))  # --scale: the largest message
budget=$([[ $quick == 1 ]] && echo 0.02 || echo 0.1)
# 4 ranks busy-wait on this machine's 2 cores (MPICH over UCX polls), so
# each large allreduce's time depends on how the scheduler shares them out.
# The claims below read medians of 9 iterations, not the bench's 5: over 5,
# a CI run measured hierarchical no faster than the ring.
iterations=9
rates=$([[ $quick == 1 ]] && echo 1gbit || echo "1gbit 10gbit")
algorithms=ring,rhd,tree,hierarchical,builtin
# ddl-model checks its predictions every 16x up to 1 MiB (16 MiB in the full run).
check_max=$((quick ? 1 << 20 : max))
check_sizes=$(awk -v max="$check_max" 'BEGIN { for (s = 4096; s <= max; s *= 16) printf "%s%d", (s > 4096 ? "," : ""), s }')
sizes=$(awk -v max="$max" 'BEGIN { for (s = 4096; s <= max; s *= 2) printf "%s%d", (s > 4096 ? "," : ""), s }')
# A finalize over UCX's TCP transport can hang (docs/CLUSTER.md); the
# watchdog ends it after the stall timeout, with the job's work done.
export DDL_STALL_TIMEOUT=${DDL_STALL_TIMEOUT:-15}

# on_cluster RATE: each measurement on 2 nodes x 2 ranks over TCP, the link
# limited to RATE. A job's output is checked for its last line rather than
# its exit status, which a finalize cut short by the watchdog may spoil.
on_cluster() {
  local rate=$1 status=0
  "$simulate" --nodes 2 --ranks-per-node 2 --rate "$rate" --between-nodes tcp -- bash -c '
    "$DDL_CLUSTER_MPIEXEC" -n 4 "$0" --min-bytes 4096 --max-bytes "$2" --budget "$3" --min-iterations "$9" \
      --algorithms "$4" --interface eth0 > "$6/measured-$5.txt" 2>&1
    "$DDL_CLUSTER_MPIEXEC" -n 4 "$1" --budget "$3" --check-sizes "$7" --ranks 4 --ranks-per-node 2 \
      --sizes "$8" --csv "$6/model-$5.csv" > "$6/model-$5.txt" 2>&1
    exit 0' "$build/bench/ddl_bench_allreduce" "$build/apps/ddl-model" "$max" "$budget" "$algorithms" "$rate" \
    "$out" "$check_sizes" "$sizes" "$iterations" || status=$?
  if [[ $status == 77 ]]; then
    echo "$lesson: skipped: the simulated cluster needs root (network namespaces)"
    exit 77
  fi
  grep -q "^ *$max " "$out/measured-$rate.txt" ||
    { echo "$lesson: the measurement at $rate did not finish: $(tail -5 "$out/measured-$rate.txt")" >&2; exit 1; }
  grep -q "error |predicted" "$out/model-$rate.txt" ||
    { echo "$lesson: ddl-model at $rate did not finish: $(tail -5 "$out/model-$rate.txt")" >&2; exit 1; }
}

# One row per size: bytes, then per algorithm its time (us) and the bytes
# the nodes' links carried per allreduce (the bench's columns: size count |
# name time algbw busbw wrong sent | ...).
columns() {
  awk '$1 ~ /^[0-9]+$/ { printf "%s", $1; for (k = 0; k < 5; ++k) printf " %s %s", $(4 + 6 * k), $(8 + 6 * k); print "" }' "$1"
}

for rate in $rates; do
  echo "$lesson: 2 nodes x 2 ranks, the link between them at $rate: every allreduce, 4 KiB to $max B"
  on_cluster "$rate"
  columns "$out/measured-$rate.txt" > "$out/measured-$rate.dat"
  # The model's predictions at the same sizes: bytes, ring rhd tree hierarchical (us).
  awk -F, 'NR > 1 && $1 == 4 { t[$2 "," $3] = $4 * 1e6; sizes[$2] = 1 }
    END { n = split("ring rhd tree hierarchical", names, " ")
      for (s in sizes) { printf "%s", s; for (k = 1; k <= n; ++k) printf " %s", ((s "," names[k]) in t) ? t[s "," names[k]] : "-"; print "" } }' \
    "$out/model-$rate.csv" | sort -n > "$out/model-$rate.dat"
done

{
  for rate in $rates; do
    echo "# $rate between the nodes: size (B), then time (us) and bytes across per allreduce of $algorithms"
    cat "$out/measured-$rate.dat"
    echo "# the model fitted there: size (B), ring rhd tree hierarchical (us)"
    cat "$out/model-$rate.dat"
    grep -E "^  (within a node|between nodes) |error \|predicted" "$out/model-$rate.txt"
  done
} > "$out/table.txt"
for rate in $rates; do fitted_on "$out/model-$rate.txt"; done

{
  figure_preamble 1000 420
  echo 'set multiplot layout 1,2'
  echo 'set logscale xy; set xlabel "message (bytes)"; set key top left'
  echo 'set title "time per allreduce at 1 Gbit/s between nodes (points: measured, lines: model)"; set ylabel "us"'
  echo "plot for [k=0:3] \"$out/measured-1gbit.dat\" using 1:(column(2 + 2 * k)) with points pt 7 lc k + 1 \\"
  echo "       title word(\"ring rhd tree hierarchical\", k + 1), \\"
  echo "     for [k=0:3] \"$out/model-1gbit.dat\" using 1:(column(2 + k)) with lines lc k + 1 notitle"
  echo 'set title "bytes across the link per allreduce, measured"; set ylabel "bytes"'
  echo "plot for [k=0:3] \"$out/measured-1gbit.dat\" using 1:(column(3 + 2 * k)) with linespoints pt 7 lc k + 1 \\"
  echo "       title word(\"ring rhd tree hierarchical\", k + 1), x with lines dt 2 lc 8 title \"the message\""
  echo 'unset multiplot'
} | gnuplot

# The claims at 1 Gbit/s. Bytes, at the largest message: the flat ring
# sends 2(p-1)/p = 1.5 messages out of each of the 2 nodes, hierarchical's
# leaders 2(N-1)/N = 1 each (TCP's headers add a few percent to both).
# Time, over the two largest messages together (8 and 16 MiB in the quick
# run): the model predicts about 0.7 of the ring's, measured 0.72-0.86 on
# AMD EPYCs and 0.76-0.90 on an Intel Xeon VM; claimed with a margin. Below a few MiB the two are within this 2-core
# machine's noise (4 ranks share 2 cores with TCP's work).
measured() { cell "$out/measured-1gbit.dat" "$max" "$1"; }
claim "1 Gbit/s, $max B: hierarchical sends at most 3/4 of the ring's bytes across the link (formula: 2/3)" \
  "hierarchical < 0.75 * ring" ring="$(measured 3)" hierarchical="$(measured 9)"
largest() { awk -v max="$max" -v c="$1" '$1 >= max / 2 { t += $c } END { print t }' "$out/measured-1gbit.dat"; }
claim "1 Gbit/s, $((max / 2)) and $max B: hierarchical is at least 5% faster than the flat ring" \
  "hierarchical < 0.95 * ring" ring="$(largest 2)" hierarchical="$(largest 8)"
# The model fitted on this cluster predicts every algorithm at every size
# checked within a factor the lesson states: its median error.
median_error=$(sed -n 's/.*error |predicted \/ measured - 1|: median \([0-9.]*\)%.*/\1/p' "$out/model-1gbit.txt")
# Measured 21-36% in quick runs on a shared host (docs/lessons): the bound
# leaves room for that host's noise, not for a model gone wrong.
claim "1 Gbit/s: ddl-model's predictions, fitted on this cluster, are within 50% of the measured times (median)" \
  "error < 50" error="$median_error"
finish
