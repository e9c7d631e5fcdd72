#!/usr/bin/env bash
# Lesson 7: gradient compression. Sending gradients as float16 halves the
# bytes of every allreduce; does training lose accuracy, and when does the
# saving matter? Trains mnist_cnn data-parallel on 2 ranks with float32 and
# with float16 gradients on the wire (same seed, same data), and asks the
# cost model what halving the bytes is worth on a slower network and more
# ranks (docs/lessons/07-gradient-compression.md).
#
#   lessons/07-gradient-compression.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=07-gradient-compression
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" "$build/apps/ddl-model" mpiexec gnuplot

if ((quick)); then
  run=(--epochs "$(scaled 1)" --train-limit 1024 --test-limit 500)  # --scale: epochs
else
  run=(--epochs "$(scaled 6)")
fi
for wire in float32 float16; do
  extra=()
  [[ $wire == float16 ]] && extra=(--fp16-compression)
  echo "$lesson: training on 2 ranks with $wire gradients on the wire"
  rm -f "$out/$wire.csv"
  mpiexec -n 2 "$build/apps/ddl-train" --parallel data --allreduce ring --threads 1 --seed 1 "${run[@]}" \
    "${extra[@]}" --log-csv "$out/$wire.csv" > "$out/$wire.txt" 2>&1 || { cat "$out/$wire.txt" >&2; exit 1; }
done

params=$(sed -n 's/^Total params: //p' "$out/float32.txt" | tr -d ,)
waits=()
for wire in float32 float16; do waits+=("$(waiting "$out/$wire.txt")"); done
{
  echo "# epoch, test accuracy with float32 and with float16 gradients, epoch seconds of each"
  paste -d, <(cut -d, -f1,5 "$out/float32.csv") <(cut -d, -f5 "$out/float16.csv") \
    <(cut -d, -f7 "$out/float32.csv") <(cut -d, -f7 "$out/float16.csv") | tail -n +2 | tr , ' '
  # The ring sends 2 (n - 1) / n of the gradients from each rank per step: all of them on 2 ranks.
  awk -v p="$params" 'BEGIN { printf "# bytes each rank sends per step: float32 %.2f MB, float16 %.2f MB\n", p * 4 / 1e6, p * 2 / 1e6 }'
  echo "# share of step time waiting for gradients: float32 ${waits[0]}%, float16 ${waits[1]}%"
} > "$out/table.txt"

# What halving the bytes is worth elsewhere: mnist_cnn's gradients at this
# machine's step time, over a 10 Gb/s network with 8 ranks per node.
# The step time: the last epoch's samples/s at batch 128 over 2 ranks.
step=$(awk -F, 'NR > 1 { rate = $8 } END { printf "%.1f", 128 / rate * 1000 }' "$out/float32.csv")
for wire in float32 float16; do
  bytes_per_value=$([[ $wire == float32 ]] && echo 4 || echo 2)
  megabytes=$(awk -v p="$params" -v b="$bytes_per_value" 'BEGIN { printf "%.2f", p * b / 1e6 }')
  "$build/apps/ddl-model" --no-measure --latency 5us --bandwidth 10Gb/s --ranks-per-node 8 --ranks 8,16,32,64,128 \
    --sizes 4096 --gradient-mb "$megabytes" --step-ms "$step" |
    awk '/^data-parallel efficiency/ { on = 1; next } /the ring (falls|stays)/ { on = 0 }
      on && /^ +[0-9]+ +[0-9.]+%/ { sub("%", "", $2); print $1, $2 }' > "$out/model-$wire.dat"
  echo "# model, 10 Gb/s between nodes of 8 ranks, ${step} ms steps, $wire ($megabytes MB): ranks, ring efficiency (%)"
  cat "$out/model-$wire.dat"
done >> "$out/table.txt"

# The claims. Accuracy, after the same steps from the same seed and data:
# the two runs differ only in how gradients are rounded on the wire, which
# changes a run's path a little (0.3 points at most over 6 epochs, 1.4
# after the quick run's 8 steps); 5 points is far above that and far below
# what broken gradients cost (chance is 10%).
accuracy() { awk -F, 'NR > 1 { a = $5 } END { print a }' "$out/$1.csv"; }
claim "float16 gradients on the wire keep the accuracy of float32 ones (same seed, same steps)" \
  "f16 > f32 - 0.05 && f16 < f32 + 0.05" f32="$(accuracy float32)" f16="$(accuracy float16)"
# Where it pays, on the model: the communication in steps
# (communication_in_steps, common.sh). Half the bytes would halve it if
# bandwidth were all; the ring's latencies do not halve, hence 0.75x asked
# (0.56x here).
overhead() { communication_in_steps "$(cell "$out/model-$1.dat" "$2" 2)"; }
claim "model, 128 ranks over 10 Gb/s: float16 gradients spend less of the step communicating" \
  "f16 < 0.75 * f32" f32="$(overhead float32 128)" f16="$(overhead float16 128)"

gnuplot <<GNUPLOT
$(figure_preamble 1400 500)
set multiplot layout 1,2 title "Gradient compression: float16 on the wire halves the bytes"
set title "test accuracy, mnist_cnn on 2 ranks (same seed and data)"
set xlabel "epoch"
set ylabel "test accuracy"
set key bottom right
set xtics 1
plot "< grep -v '^#' $out/table.txt | awk 'NF == 5'" using 1:2 with linespoints lw 2 title "float32 gradients", \
     "" using 1:3 with linespoints lw 2 dt 2 title "float16 gradients"
set title "model: data-parallel efficiency over 10 Gb/s, ${step} ms steps"
set xlabel "ranks (8 per node)"
set ylabel "efficiency"
set logscale x 2
set xtics auto
set format y "%.0f%%"
plot "$out/model-float32.dat" using 1:2 with linespoints lw 2 title "float32 gradients", \
     "$out/model-float16.dat" using 1:2 with linespoints lw 2 dt 2 title "float16 gradients"
unset multiplot
GNUPLOT
finish
