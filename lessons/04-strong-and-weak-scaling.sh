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
#   lessons/04-strong-and-weak-scaling.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=04-strong-and-weak-scaling
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot

if ((quick)); then
  samples=$(scaled 512) ranks=(1 2) rounds=1  # --scale: training images
else
  samples=$(scaled 12800) ranks=(1 2 3 4) rounds=3
fi
# No loader thread (--prefetch 0): on 2 cores it would give 1 process a
# second core that the ranks of the parallel runs must share.
common=(--epochs 1 --train-limit "$samples" --no-validation --threads 1 --prefetch 0)
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# "ranks per-rank-batch" -> "samples/s waiting%", the median of the rounds,
# the rounds of all configurations interleaved so they see the same load.
# (Weak and strong scaling share 1 rank at 64 and 2 ranks at 64 each.)
configs=()
for n in "${ranks[@]}"; do configs+=("$n 64"); done
for n in "${ranks[@]}"; do ((128 % n == 0 && n != 2)) && configs+=("$n $((128 / n))"); done
declare -A rates waits
for ((r = 1; r <= rounds; r++)); do
  for config in "${configs[@]}"; do
    read -r n per_rank <<< "$config"
    echo "$lesson: round $r, $n rank(s), $per_rank samples per rank"
    parallel=()
    ((n > 1)) && parallel=(--parallel data)
    log="$out/run-$n-$per_rank-$r.txt"
    mpiexec -n "$n" "$build/apps/ddl-train" "${parallel[@]}" "${common[@]}" --batch-per-rank "$per_rank" \
      > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
    rates[$config]+="$(rate "$log") "
    waits[$config]+="$(waiting "$log") "
  done
done
echo "# scaling, ranks, per-rank batch, samples/s, speed-up over 1 rank, efficiency %, % of step time waiting for gradients (medians of $rounds rounds)" \
  > "$out/table.txt"
for scaling in weak strong; do
  : > "$out/$scaling-table.dat"
  for n in "${ranks[@]}"; do
    if [[ $scaling == weak ]]; then per_rank=64; else per_rank=$((128 / n)); fi
    [[ $scaling == weak ]] || ((128 % n == 0)) || continue  # the global batch must split evenly
    config="$n $per_rank"
    one="1 $([[ $scaling == weak ]] && echo 64 || echo 128)"
    awk -v s="$scaling" -v n="$n" -v b="$per_rank" -v rate="$(median <<< "${rates[$config]}")" \
      -v one="$(median <<< "${rates[$one]}")" -v wait="$(median <<< "${waits[$config]:-0}")" \
      'BEGIN { printf "%s %d %d %d %.2f %.1f %s\n", s, n, b, rate, rate / one, 100 * rate / one / n, (wait == "" ? 0 : wait) }' \
      >> "$out/$scaling-table.dat"
  done
  cat "$out/$scaling-table.dat" >> "$out/table.txt"
done

gnuplot <<GNUPLOT
$(figure_preamble 1400 500)
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
finish
