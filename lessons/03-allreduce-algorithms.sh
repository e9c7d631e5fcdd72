#!/usr/bin/env bash
# Lesson 3: allreduce algorithms. Small messages are latency-bound (the
# algorithm with the fewest steps wins), large ones bandwidth-bound (the
# one that moves the fewest bytes through the busiest link wins), and the
# crossover moves with the rank count. Measures every algorithm on 2 ranks
# here beside the alpha-beta-gamma model fitted to this machine, then asks
# the model for 64 ranks on 8 nodes of a cluster (docs/lessons/03-allreduce-algorithms.md).
#
#   lessons/03-allreduce-algorithms.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=03-allreduce-algorithms
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/bench/ddl_bench_allreduce" "$build/apps/ddl-model" mpiexec gnuplot

max=$(scaled $((quick ? 65536 : 64 << 20)))  # --scale: the largest message
budget=$([[ $quick == 1 ]] && echo 0.005 || echo 0.3)
algorithms=ring,rhd,tree,naive,shm,builtin
echo "$lesson: measuring every allreduce on 2 ranks, 64 B to $max B"
mpiexec -n 2 "$build/bench/ddl_bench_allreduce" --min-bytes 64 --max-bytes "$max" --budget "$budget" \
  --algorithms "$algorithms" > "$out/measured.txt"
# size, then each algorithm's time in us (the table's columns: size count |
# time algbw busbw wrong | ...).
awk '$1 ~ /^[0-9]+$/ { printf "%s", $1; for (k = 0; k < 6; ++k) printf " %s", $(4 + 5 * k); print "" }' \
  "$out/measured.txt" > "$out/measured.dat"
sizes=$(awk '{ printf "%s%s", sep, $1; sep = "," }' "$out/measured.dat")

echo "$lesson: fitting the model here, and asking it about 64 ranks on 8 nodes"
mpiexec -n 2 "$build/apps/ddl-model" --budget "$budget" --check-sizes 4096,1048576 --ranks 2 --sizes "$sizes" \
  --csv "$out/model-here.csv" > "$out/model-here.txt"
# The cluster: 8 ranks per node on 50 GB/s within a node, 100 Gb/s InfiniBand between nodes.
"$build/apps/ddl-model" --no-measure --ranks 64 --sizes "$sizes" --ranks-per-node 8 --node-latency 0.5us \
  --node-bandwidth 50GB/s --latency 2us --bandwidth 100Gb/s --csv "$out/model-cluster.csv" > "$out/model-cluster.txt"
# One row per size: bytes, then ring rhd tree naive shm in us ("-" where not modelled).
pivot() {
  awk -F, 'NR > 1 { t[$2 "," $3] = $4 * 1e6; sizes[$2] = 1 }
    END { n = split("ring rhd tree naive shm", names, " ")
      for (s in sizes) { printf "%s", s; for (k = 1; k <= n; ++k) printf " %s", ((s "," names[k]) in t) ? t[s "," names[k]] : "-"; print "" } }' \
    "$1" | sort -n
}
pivot "$out/model-here.csv" > "$out/model-here.dat"
pivot "$out/model-cluster.csv" > "$out/model-cluster.dat"

{
  echo "# measured on 2 ranks here: size (B), then time (us) of $algorithms"
  cat "$out/measured.dat"
  echo "# the model fitted here, 2 ranks: size (B), ring rhd tree naive shm (us)"
  cat "$out/model-here.dat"
  echo "# the model, 64 ranks on 8 nodes: size (B), ring rhd tree naive shm (us)"
  cat "$out/model-cluster.dat"
  grep -E "error \|predicted|^  within a node" "$out/model-here.txt"
  grep -A2 "where recursive" "$out/model-cluster.txt"
} > "$out/table.txt"

gnuplot <<GNUPLOT
$(figure_preamble 1400 520)
set datafile missing "-"
set logscale xy
set format x "%.0s%cB"
set key top left
set xlabel "message size"
set ylabel "time per allreduce (us)"
set multiplot layout 1,2 title "Allreduce algorithms: latency-bound small messages, bandwidth-bound large ones"
set title "2 ranks on this machine: measured (points) and the model fitted here (lines)"
plot "$out/measured.dat" using 1:2 with points pt 7 lc 1 title "ring", \
     "" using 1:4 with points pt 5 lc 2 title "tree", \
     "" using 1:5 with points pt 9 lc 3 title "naive", \
     "" using 1:6 with points pt 13 lc 4 title "shm", \
     "" using 1:7 with points pt 6 lc 7 title "builtin (MPI)", \
     "$out/model-here.dat" using 1:2 with lines lc 1 title "ring = rhd, model", \
     "" using 1:4 with lines lc 2 title "tree, model", \
     "" using 1:5 with lines dt 2 lc 3 title "naive, model", \
     "" using 1:6 with lines lc 4 title "shm, model"
set title "64 ranks on 8 nodes (model: 50 GB/s in a node, 100 Gb/s between)"
plot "$out/model-cluster.dat" using 1:2 with lines lw 2 lc 1 title "ring", \
     "" using 1:3 with lines lw 3 dt 2 lc 6 title "rhd", \
     "" using 1:4 with lines lw 2 lc 2 title "tree", \
     "" using 1:5 with lines lw 2 lc 3 title "naive"
unset multiplot
GNUPLOT
finish
