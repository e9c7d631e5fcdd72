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
require "$build/apps/ddl-train" "$build/apps/ddl-model" mpiexec gnuplot

if ((quick)); then
  samples=$(scaled 512) ranks=(1 2) rounds=1  # --scale: training images
else
  samples=$(scaled 12800) ranks=(1 2 3 4) rounds=3
fi
# No loader thread (--prefetch 0): on 2 cores it would give 1 process a
# second core that the ranks of the parallel runs must share.
common=(--epochs 1 --train-limit "$samples" --no-validation --threads 1 --prefetch 0)
oversubscription "${ranks[-1]}" "what the ranks compute" "the speed-up of more ranks than cores (the model projects that)"
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

# The claim needs more ranks than this machine has cores, so it is checked
# on the cost model fitted here and fed the steps measured here: one rank's
# step at 64 samples (weak scaling's, whatever the ranks) and at 128
# (strong scaling's on N ranks: 1/N of it). The model prices the ring
# allreduce of mnist_cnn's gradients on its default cluster (8 ranks a
# node, this machine's link within a node).
median_of() { median <<< "${rates[$1]}"; }
step64=$(awk -v r="$(median_of "1 64")" 'BEGIN { printf "%.6f", 64 / r }')
step128=$(awk -v r="$(median_of "1 128")" 'BEGIN { printf "%.6f", 128 / r }')
gradient_bytes=$(sed -n 's/^Total params: //p' "$out/run-1-64-1.txt" | tr -d , | awk '{ print $1 * 4 }')
budget=$([[ $quick == 1 ]] && echo 0.005 || echo 0.1)
echo "$lesson: fitting the model here, for steps of $step64 s (64 samples) and $step128 s (128)"
mpiexec -n 2 "$build/apps/ddl-model" --budget "$budget" --check-sizes "$gradient_bytes" --ranks 2,4,8,16,32,64 \
  --sizes "$gradient_bytes" --csv "$out/model.csv" > "$out/model.txt"
fitted_on "$out/model.txt"
# ranks, weak efficiency %, weak share synchronising %, strong efficiency %, strong share %
awk -F, -v weak="$step64" -v strong="$step128" '$3 == "ring" {
    n = $1; a = $4; c = strong / n
    printf "%d %.1f %.1f %.1f %.1f\n", n, 100 * weak / (weak + a), 100 * a / (weak + a), 100 * c / (c + a), 100 * a / (c + a) }' \
  "$out/model.csv" > "$out/model.dat"
{
  echo "# the model fitted here (ring allreduce of $gradient_bytes B; steps $step64 s at 64, $step128 s at 128 samples):"
  echo "# ranks, weak efficiency %, weak share synchronising %, strong efficiency %, strong share %"
  cat "$out/model.dat"
} >> "$out/table.txt"
# Strong scaling's share synchronising grows with every doubling of the
# ranks; weak scaling's stays what it is at 2. At 64 ranks the strong share
# is 10x the weak one or more on this machine's steps; 2x is asked, which
# holds unless one step were some 20x faster than here.
share() { cell "$out/model.dat" "$1" "$2"; }
claim "model fitted here: strong scaling's share of the step synchronising grows with the ranks (2 to 64)" \
  "s2 < s4 && s4 < s8 && s8 < s16 && s16 < s32 && s32 < s64" s2="$(share 2 5)" s4="$(share 4 5)" \
  s8="$(share 8 5)" s16="$(share 16 5)" s32="$(share 32 5)" s64="$(share 64 5)"
claim "model fitted here: at 64 ranks strong scaling synchronises a larger share of the step than weak scaling" \
  "strong > 2 * weak" strong="$(share 64 5)" weak="$(share 64 3)"

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
