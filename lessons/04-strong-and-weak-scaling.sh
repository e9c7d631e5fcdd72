#!/usr/bin/env bash
# Lesson 4: strong and weak scaling. Weak scaling keeps each rank's batch
# (the global batch grows with the ranks: Horovod's convention) and asks
# whether N ranks do N times the work per second; strong scaling keeps the
# global batch and splits it, so each rank's share of compute shrinks while
# the gradients it must synchronise stay the same size, and the share of the
# step spent synchronising grows. Trains mnist_cnn data-parallel both ways
# on 1 to 4 ranks (docs/lessons/04-strong-and-weak-scaling.md). This
# machine has 2 cores: 3 and 4 ranks share them, so their rows measure
# oversubscription as much as scaling.
#
#   lessons/04-strong-and-weak-scaling.sh [--quick] [--build DIR] [--out DIR]
lesson=04-strong-and-weak-scaling
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot

if ((quick)); then
  samples=512 ranks=(1 2)
else
  samples=12800 ranks=(1 2 3 4)
fi
common=(--epochs 1 --train-limit "$samples" --no-validation --threads 1)
rate() { sed -n 's/.*epoch(s) in .* \([0-9][0-9]*\) samples\/s.*/\1/p' "$1"; }
waiting() { sed -n 's/^gradient synchronisation: \([0-9.]*\)%.*/\1/p' "$1"; }
echo "# scaling, ranks, per-rank batch, samples/s, speed-up over 1 rank, efficiency %, % of step time waiting for gradients" \
  > "$out/table.txt"
for scaling in weak strong; do
  : > "$out/$scaling.dat"
  for n in "${ranks[@]}"; do
    if [[ $scaling == weak ]]; then batch=(--batch-per-rank 64); per_rank=64; else batch=(--batch-size 128); per_rank=$((128 / n)); fi
    ((128 % n == 0)) || [[ $scaling == weak ]] || continue  # the global batch must split evenly
    echo "$lesson: $scaling scaling, $n rank(s), $per_rank samples per rank"
    parallel=()
    ((n > 1)) && parallel=(--parallel data)
    mpiexec -n "$n" "$build/apps/ddl-train" "${parallel[@]}" "${common[@]}" "${batch[@]}" \
      > "$out/$scaling-$n.txt" 2>&1 || { cat "$out/$scaling-$n.txt" >&2; exit 1; }
    echo "$n $per_rank $(rate "$out/$scaling-$n.txt") $(waiting "$out/$scaling-$n.txt")" >> "$out/$scaling.dat"
  done
  awk -v s="$scaling" 'NR == 1 { one = $3 } { printf "%s %d %d %d %.2f %.1f %s\n", s, $1, $2, $3, $3 / one, 100 * $3 / one / $1, ($4 == "" ? 0 : $4) }' \
    "$out/$scaling.dat" > "$out/$scaling-table.dat"
  cat "$out/$scaling-table.dat" >> "$out/table.txt"
done

gnuplot <<GNUPLOT
set terminal pngcairo noenhanced size 1400,500 font "sans,10"
set output "$out/figure.png"
set grid
set xlabel "ranks (2 cores: 3 and 4 ranks share them)"
set xtics 1
set multiplot layout 1,2 title "Strong and weak scaling: mnist_cnn, data-parallel ring allreduce"
set title "speed-up over 1 rank"
set key top left
plot x with lines dt 2 lc rgb "black" title "ideal", \
     "$out/weak-table.dat" using 2:5 with linespoints lw 2 title "weak: 64 samples per rank", \
     "$out/strong-table.dat" using 2:5 with linespoints lw 2 title "strong: 128 samples in all"
set title "share of step time waiting for gradients"
set format y "%.0f%%"
plot "$out/weak-table.dat" using 2:7 with linespoints lw 2 title "weak", \
     "$out/strong-table.dat" using 2:7 with linespoints lw 2 title "strong"
unset multiplot
GNUPLOT
finish "$out/table.txt" "$out/figure.png"
