#!/usr/bin/env bash
# Lesson 1: data against model (pipeline) parallelism on the same model.
# Data parallelism copies the whole model to every rank and exchanges
# gradients (the size of the model) once per step; a pipeline gives each
# rank a part of the model and sends activations forward and their
# gradients back (the size of a layer's output, per sample) every
# micro-batch. Trains mnist_cnn on 1 process, on 2 data-parallel ranks and
# as a 2-stage pipeline, and compares throughput, memory per rank and
# bytes sent per step (docs/lessons/01-data-vs-pipeline-parallelism.md).
#
#   lessons/01-data-vs-pipeline-parallelism.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=01-data-vs-pipeline-parallelism
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot /usr/bin/time

samples=$(scaled "$([[ $quick == 1 ]] && echo 512 || echo 12800)")  # --scale: training images
common=(--epochs 1 --train-limit "$samples" --test-limit 128 --no-validation --threads 1 --batch-size 128)
# Peak resident memory of each rank in MiB, from /usr/bin/time, rank 0
# first: each rank writes its one line to a file of its own, named by the
# rank mpiexec gives it (MPICH's PMI_RANK, Open MPI's OMPI_COMM_WORLD_RANK).
peaks() { cat "$1".* | awk '{ printf "%s%.0f", sep, $2 / 1024; sep = " " }'; }
peak_of() { awk '{ printf "%.0f", $2 / 1024 }' "$1.$2"; }

run() {
  local name=$1 n=$2
  shift 2
  echo "$lesson: $name"
  rm -f "$out/$name.rss".*
  # shellcheck disable=SC2016 # expanded by each rank's shell, not this one
  mpiexec -n "$n" bash -c '/usr/bin/time -o "$0.${PMI_RANK:-$OMPI_COMM_WORLD_RANK}" -f "maxrss %M KiB" "$@"' \
    "$out/$name.rss" \
    "$build/apps/ddl-train" "${common[@]}" "$@" > "$out/$name.txt" 2>&1 ||
    { cat "$out/$name.txt" >&2; exit 1; }
}
run one 1
run data 2 --parallel data
# The cut is given (--split 3: the two convolutions on rank 0), not balanced
# by time: timings on a loaded machine could move it, and what the pipeline
# sends is the output of the layer it is cut after.
run pipeline 2 --parallel pipeline --split 3

params=$(sed -n 's/^Total params: //p' "$out/one.txt" | tr -d ,)
# Data parallelism: what each rank sent per step, as its report counted it
# (the ring sends 2 (n - 1) / n of the float32 gradients, all of them on 2
# ranks); rank 0's and rank 1's.
data_sent=$(awk '/^training state per rank/ { t = 1 }
  t && $1 ~ /^[01]$/ { printf "%s%.2f", sep, $7; sep = " "; if ($1 == "1") exit }' "$out/data.txt")
data_mib=${data_sent%% *}
# The pipeline: what each stage sent per training step (the last column of
# its report).
pipeline_mib=$(awk '/^[01] +[0-9]+-[0-9]+ / && NF == 11 { printf "%s%.1f", sep, $11; sep = " " }' "$out/pipeline.txt")
# setup, samples/s, peak MiB of each rank (rank 0 first), MiB sent per step by each rank
{
  echo "1-process $(rate "$out/one.txt") $(peaks "$out/one.rss") 0 0 0"
  echo "data-parallel $(rate "$out/data.txt") $(peaks "$out/data.rss") $data_sent"
  echo "pipeline $(rate "$out/pipeline.txt") $(peaks "$out/pipeline.rss") $pipeline_mib"
} > "$out/bars.dat"
{
  echo "# setup, samples/s, peak memory of each rank (MiB, rank 0 first), MiB sent per step by each rank"
  cat "$out/bars.dat"
  grep "^bubble:" "$out/pipeline.txt"
} > "$out/table.txt"

# The claims, on quantities that do not depend on time: the parameters each
# stage holds and what the pipeline's links counted (messages, bytes).
# stage, last layer, params MiB, messages and MiB sent per step, from the pipeline's report
read -r -a stage0 <<< "$(awk '/^0 +[0-9]+-[0-9]+ / && NF == 11 { split($2, l, "-"); print 0, l[2], $3, $10, $11 }' "$out/pipeline.txt")"
read -r -a stage1 <<< "$(awk '/^1 +[0-9]+-[0-9]+ / && NF == 11 { split($2, l, "-"); print 1, l[2], $3, $10, $11 }' "$out/pipeline.txt")"
micro=$(sed -n 's/.*(1f1b, \([0-9]*\) micro-batches per batch.*/\1/p' "$out/pipeline.txt")
# Floats per sample at the cut: the output shape of stage 0's last layer, from the summary.
floats=$(awk -v layer="${stage0[1]:-}" '$1 == layer && match($0, /\(None(, [0-9]+)+\)/) {
    shape = substr($0, RSTART, RLENGTH); gsub(/[^0-9,]/, "", shape)
    n = split(shape, d, ","); v = 1; for (k = 2; k <= n; ++k) v *= d[k]; print v }' "$out/one.txt")
whole=$(awk -v p="$params" 'BEGIN { printf "%.4f", p * 4 / 1048576 }')
# (The report rounds to 0.01 MiB, hence the 1%.)
claim "the pipeline's stages split the parameters (each less, the two once together; each data-parallel rank holds all)" \
  "s0 < whole && s1 < whole && s0 + s1 > 0.99 * whole && s0 + s1 < 1.01 * whole" \
  s0="${stage0[2]:-}" s1="${stage1[2]:-}" whole="$whole"
# Stage 1 sends back the gradient of every activation stage 0 sent it: one
# message per micro-batch, the cut's floats for every sample of a step.
cut_mib=$(awk -v floats="${floats:-0}" 'BEGIN { printf "%.4f", 128 * floats * 4 / 1048576 }')
claim "the pipeline sends the activations at the cut every micro-batch (stage 1's gradients back, as counted)" \
  "messages == micro && sent > 0.99 * cut - 0.005 && sent < 1.01 * cut + 0.005" \
  messages="${stage1[3]:-}" micro="$micro" sent="${stage1[4]:-}" cut="$cut_mib"
# Data parallelism's bytes are the ring's 2 (n - 1) / n of the gradients,
# the model's size on 2 ranks; mnist_cnn's activations at the cut are four
# times that.
claim "each data-parallel rank sends the ring's 2 (n - 1) / n of the gradients per step, as counted" \
  "data > 0.99 * model && data < 1.01 * model" data="$data_mib" \
  model="$(awk -v p="$params" 'BEGIN { printf "%.4f", p * 4 / 1048576 }')"
claim "mnist_cnn, a small model with large activations, sends more per step as a pipeline than data-parallel" \
  "pipeline > 2 * data" pipeline="${pipeline_mib##* }" data="$data_mib"
# Memory: each stage holds its part of the model and the activations of
# the micro-batches in flight, one process all of the model and all of a
# batch's activations. (Against a data-parallel rank, which holds all of
# the model but half a batch's activations, neither stage of a model this
# small is reliably lower: the lesson's text.)
claim "each pipeline stage peaks below one process training the whole model" \
  "stage0 < one && stage1 < one" stage0="$(peak_of "$out/pipeline.rss" 0)" stage1="$(peak_of "$out/pipeline.rss" 1)" \
  one="$(peak_of "$out/one.rss" 0)"

gnuplot <<GNUPLOT
$(figure_preamble 1500 460)
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set grid ytics
set key top left
set yrange [0:*]
set multiplot layout 1,3 title "mnist_cnn at batch 128: 1 process, 2 data-parallel ranks, a 2-stage pipeline"
set title "throughput (samples/s)"
plot "$out/bars.dat" using 2:xtic(1) notitle lc 1
set title "peak memory per rank (MiB)"
plot "$out/bars.dat" using 3:xtic(1) title "rank 0" lc 2, "" using 4 title "rank 1" lc 3
set title "MiB sent per step, per rank"
plot "$out/bars.dat" using 5:xtic(1) title "rank 0" lc 4, "" using 6 title "rank 1" lc 5
unset multiplot
GNUPLOT
finish
