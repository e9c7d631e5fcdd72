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
# The cluster: 8 ranks per node on 50 GB/s within a node, 100 Gb/s InfiniBand
# between nodes. Its sizes reach 64 MiB in the quick run too, past the
# crossover the lesson is about; 16 and 1024 ranks show the crossover move.
cluster_sizes=$(awk -v s="$sizes" 'BEGIN { n = split(s, v, ","); print s (v[n] < 67108864 ? ",67108864" : "") }')
"$build/apps/ddl-model" --no-measure --ranks 16,64,1024 --sizes "$cluster_sizes" --ranks-per-node 8 --node-latency 0.5us \
  --node-bandwidth 50GB/s --latency 2us --bandwidth 100Gb/s --csv "$out/model-cluster.csv" > "$out/model-cluster.txt"
# One row per size: bytes, then ring rhd tree naive shm in us ("-" where not
# modelled), at the rank count $2.
pivot() {
  awk -F, -v ranks="$2" 'NR > 1 && $1 == ranks { t[$2 "," $3] = $4 * 1e6; sizes[$2] = 1 }
    END { n = split("ring rhd tree naive shm", names, " ")
      for (s in sizes) { printf "%s", s; for (k = 1; k <= n; ++k) printf " %s", ((s "," names[k]) in t) ? t[s "," names[k]] : "-"; print "" } }' \
    "$1" | sort -n
}
pivot "$out/model-here.csv" 2 > "$out/model-here.dat"
pivot "$out/model-cluster.csv" 64 > "$out/model-cluster.dat"

{
  echo "# measured on 2 ranks here: size (B), then time (us) of $algorithms"
  cat "$out/measured.dat"
  echo "# the model fitted here, 2 ranks: size (B), ring rhd tree naive shm (us)"
  cat "$out/model-here.dat"
  echo "# the model, 64 ranks on 8 nodes: size (B), ring rhd tree naive shm (us)"
  cat "$out/model-cluster.dat"
  grep -E "error \|predicted|^  within a node" "$out/model-here.txt"
  grep -A4 "where recursive" "$out/model-cluster.txt"
} > "$out/table.txt"
fitted_on "$out/model-here.txt"

# The claims. Measured here, on 2 ranks: a time at one size is the fastest
# of the message-passing algorithms (ring, rhd, tree, naive), so that one
# column's hiccup on a busy machine does not decide it. Latency-bound, 16x
# the bytes (64 B to 1 KiB) must cost less than 4x the time (about 1.2x
# here); bandwidth-bound, 64x (1 KiB to 64 KiB) more than 3x (about 8x here,
# which on a busy machine a slow 1 KiB point can halve).
fastest() { awk -v b="$1" '$1 == b { m = $2; for (k = 3; k <= 5; ++k) if ($k < m) m = $k; print m }' "$out/measured.dat"; }
claim "2 ranks, measured: small messages are latency-bound (64 B to 1 KiB, 16x the bytes)" \
  "t_1k < 4 * t_64" t_64="$(fastest 64)" t_1k="$(fastest 1024)"
if ((max >= 65536)); then
  claim "2 ranks, measured: large messages are bandwidth-bound (1 KiB to 64 KiB, 64x the bytes)" \
    "t_64k > 3 * t_1k" t_1k="$(fastest 1024)" t_64k="$(fastest 65536)"
fi
# The cluster's claims are the model's (its links are given, not measured):
# at 64 ranks the fewest steps win the smallest message, the fewest bytes
# through a node's link the largest, and the size where one gives way to
# the other grows with the ranks.
model() { cell "$out/model-cluster.dat" "$1" "$2"; }
claim "64 ranks, model: at 64 B halving/doubling (12 steps) beats the ring (126)" \
  "rhd < ring / 5" rhd="$(model 64 3)" ring="$(model 64 2)"
claim "64 ranks, model: at 64 MiB the ring (fewest bytes through a node's link) beats halving/doubling" \
  "2 * ring < rhd" ring="$(model 67108864 2)" rhd="$(model 67108864 3)"
crossover() {
  awk -v n="$1" '$1 == n && $2 == "ranks:" && /faster below/ {
      print $(NF - 1) * ($NF == "B" ? 1 : $NF == "KiB" ? 1024 : $NF == "MiB" ? 1048576 : 1073741824) }' \
    "$out/model-cluster.txt"
}
claim "model: the crossover grows with the ranks (16, 64, 1024)" \
  "c_16 < c_64 && c_64 < c_1024" c_16="$(crossover 16)" c_64="$(crossover 64)" c_1024="$(crossover 1024)"

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
