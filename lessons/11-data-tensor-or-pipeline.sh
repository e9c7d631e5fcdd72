#!/usr/bin/env bash
# Lesson 11: data, tensor or pipeline parallelism: which moves the fewest
# bytes? Data parallelism sends the gradients, a number set by the
# parameters whatever the batch; tensor parallelism (Megatron's pairs) sends
# the activations at each pair, pipeline parallelism those at the cut
# between stages: both grow with the batch. So each model has a batch below
# which splitting the model moves less than splitting the data, and it is
# parameters / (floats moved per sample): small for a convolutional model,
# whose every weight serves many positions (much compute per parameter),
# large for a wide MLP, whose every output reads thousands of inputs (much
# compute per neuron output). Trains mnist_cnn on 2 ranks each way at
# several batches and reads the bytes each rank sent per step from
# ddl-train's report, as the transport counted them
# (docs/lessons/11-data-tensor-or-pipeline.md).
#
#   lessons/11-data-tensor-or-pipeline.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=11-data-tensor-or-pipeline
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot

# --scale: steps per run (the bytes per step do not depend on it).
steps=$(scaled 2)
if ((quick)); then batches=(8 64 256); else batches=(4 8 16 32 64 128 256 512); fi

# What each rank sends per step on 2 ranks, in floats (the ring allreduce of
# n floats sends n from each of 2 ranks):
#   data      mnist_cnn's 1,199,882 gradients;
#   tensor    per sample, forward the row convolution's output (64 x 24 x
#             24) and the row Dense layer's (10), backward the column Dense
#             layer's input gradient (9216; the first convolution's input,
#             the image, needs none): 46,090;
#   pipeline  cut before layer 5 (after the max pooling): per sample 9216
#             activations forward from stage 0, 9216 gradients back from
#             stage 1.
mnist_parameters=1199882 mnist_tensor=46090 mnist_pipeline=9216
# wide_mlp (784 - 4096 x 7 - 10, 103,944,202 parameters): tensor
# parallelism's four pairs send forward 3 x 4096 + 10 and backward 3 x 4096
# floats per sample (24,586), a pipeline cut between two 4096-wide layers
# 4096: measured in docs/PERFORMANCE.md at batch 128 (12.00, 396.52 and 2.00
# MiB), drawn here from the formula.
wide_parameters=103944202 wide_tensor=24586 wide_pipeline=4096
mib() { awk -v floats="$1" 'BEGIN { printf "%.4f", floats * 4 / 1048576 }'; }

# From a ddl-train report, rank 0's sent/step MiB: data parallelism's state
# table (column 7), tensor parallelism's per-rank table (column 6), the
# pipeline's stage table (column 9).
sent() {
  awk '/^training state per rank/ { t = "data" } /^tensor parallelism, per rank/ { t = "tensor" }
       /^pipeline stages/ { t = "pipeline" }
       t == "data" && $1 == "0" && NF == 7 { print $7; exit }
       t == "tensor" && $1 == "0" && NF == 6 { print $6; exit }
       t == "pipeline" && $1 == "0" && $2 ~ /-/ && NF == 11 { print $11; exit }' "$1"
}

: > "$out/mnist.dat"
for batch in "${batches[@]}"; do
  row=$batch
  for way in data tensor pipeline; do
    echo "$lesson: mnist_cnn, batch $batch, $way parallelism"
    extra=()
    [[ $way == pipeline ]] && extra=(--split 5)
    log=$out/$way-$batch.txt
    mpiexec -n 2 "$build/apps/ddl-train" --model mnist_cnn --parallel "$way" "${extra[@]}" --batch-size "$batch" \
      --train-limit "$((steps * batch))" --test-limit 64 --epochs 1 --threads 1 --no-validation > "$log" 2>&1 ||
      { cat "$log" >&2; exit 1; }
    row+=" $(sent "$log")"
  done
  echo "$row" >> "$out/mnist.dat"
done

{
  echo "# mnist_cnn on 2 ranks: batch, then MiB rank 0 sent per step (data, tensor, pipeline), as counted;"
  echo "# the formulas: data $(mib $mnist_parameters), tensor $(mib $mnist_tensor) x batch, pipeline $(mib $mnist_pipeline) x batch"
  cat "$out/mnist.dat"
  awk -v p=$mnist_parameters -v t=$mnist_tensor -v s=$mnist_pipeline -v wp=$wide_parameters -v wt=$wide_tensor \
    -v ws=$wide_pipeline 'BEGIN {
      printf "# the batch below which each moves less than data parallelism: mnist_cnn tensor %.0f, pipeline %.0f;", p / t, p / s
      printf " wide_mlp tensor %.0f, pipeline %.0f\n", wp / wt, wp / ws }'
} > "$out/table.txt"

# The claims, on bytes counted by the transport: each strategy sends its
# formula (the report rounds to 0.01 MiB), and which one sends least flips
# where the formulas say. near A B: A is B to the report's rounding.
near() { echo "($1 > 0.995 * $2 - 0.006 && $1 < 1.005 * $2 + 0.006)"; }
while read -r batch data tensor pipeline; do
  claim "batch $batch: data parallelism sends the gradients, tensor parallelism its pairs' activations, the pipeline its cut's" \
    "$(near data d) && $(near tensor t) && $(near pipeline s)" \
    data="$data" tensor="$tensor" pipeline="$pipeline" d="$(mib $mnist_parameters)" \
    t="$(mib $((mnist_tensor * batch)))" s="$(mib $((mnist_pipeline * batch)))"
  crossing=$(awk -v p=$mnist_parameters -v t=$mnist_tensor 'BEGIN { printf "%.2f", p / t }')
  claim "batch $batch: tensor parallelism moves less than data parallelism exactly below batch $crossing" \
    "(tensor < data) == (batch < crossing)" tensor="$tensor" data="$data" batch="$batch" crossing="$crossing"
  crossing=$(awk -v p=$mnist_parameters -v s=$mnist_pipeline 'BEGIN { printf "%.2f", p / s }')
  claim "batch $batch: the pipeline moves less than data parallelism exactly below batch $crossing" \
    "(pipeline < data) == (batch < crossing)" pipeline="$pipeline" data="$data" batch="$batch" crossing="$crossing"
done < "$out/mnist.dat"

gnuplot <<GNUPLOT
$(figure_preamble 1300 500)
set multiplot layout 1,2 title "MiB each of 2 ranks sends per training step: data, tensor or pipeline parallelism"
set logscale xy
set xlabel "global batch (samples)"
set ylabel "MiB per step per rank"
set key top left
set title "mnist_cnn: counted (points), formula (lines)"
plot [2:1024] $(mib $mnist_parameters) with lines lw 2 lc 1 title "data: the gradients", \
  $(mib $mnist_tensor) * x with lines lw 2 lc 2 title "tensor: the pairs' activations", \
  $(mib $mnist_pipeline) * x with lines lw 2 lc 3 title "pipeline: the cut's activations", \
  "$out/mnist.dat" using 1:2 with points pt 7 ps 1.5 lc 1 notitle, \
  "" using 1:3 with points pt 7 ps 1.5 lc 2 notitle, \
  "" using 1:4 with points pt 7 ps 1.5 lc 3 notitle
set title "wide_mlp (formula): 4096 inputs per output neuron"
plot [2:65536] $(mib $wide_parameters) with lines lw 2 lc 1 title "data", \
  $(mib $wide_tensor) * x with lines lw 2 lc 2 title "tensor", \
  $(mib $wide_pipeline) * x with lines lw 2 lc 3 title "pipeline"
unset multiplot
GNUPLOT
finish
