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
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot /usr/bin/time

samples=$(scaled "$([[ $quick == 1 ]] && echo 512 || echo 12800)")  # --scale: training images
common=(--epochs 1 --train-limit "$samples" --test-limit 128 --no-validation --threads 1 --batch-size 128)
steps=$((samples / 128))
# Peak resident memory of each rank in MiB, from /usr/bin/time, largest first.
# (The ranks share one output, so a line may not start with it.)
peaks() { grep -o 'maxrss [0-9]* KiB' "$1" | awk '{ print $2 }' | sort -rn | awk '{ printf "%s%.0f", sep, $1 / 1024; sep = " " }'; }

run() {
  local name=$1 n=$2
  shift 2
  echo "$lesson: $name"
  mpiexec -n "$n" /usr/bin/time -f "maxrss %M KiB" "$build/apps/ddl-train" "${common[@]}" "$@" > "$out/$name.txt" 2>&1 ||
    { cat "$out/$name.txt" >&2; exit 1; }
}
run one 1
run data 2 --parallel data
run pipeline 2 --parallel pipeline

params=$(sed -n 's/^Total params: //p' "$out/one.txt" | tr -d ,)
# Data parallelism: the ring sends 2 (n - 1) / n of the float32 gradients
# per step from each rank, all of them on 2 ranks.
data_mib=$(awk -v p="$params" 'BEGIN { printf "%.1f", p * 4 / 1048576 }')
# The pipeline: what each stage sent over the run (the last column of its
# report), per training step; stage 0 also sent the final test batch's
# activations.
pipeline_mib=$(awk -v steps="$steps" '/^[01] +[0-9]+-[0-9]+ / && NF == 9 {
    printf "%s%.1f", sep, $9 / ($1 == 0 ? steps + 1 : steps); sep = " " }' "$out/pipeline.txt")
# setup, samples/s, peak MiB of each rank (largest first), MiB sent per step by each rank
{
  echo "1-process $(rate "$out/one.txt") $(peaks "$out/one.txt") 0 0 0"
  echo "data-parallel $(rate "$out/data.txt") $(peaks "$out/data.txt") $data_mib $data_mib"
  echo "pipeline $(rate "$out/pipeline.txt") $(peaks "$out/pipeline.txt") $pipeline_mib"
} > "$out/bars.dat"
{
  echo "# setup, samples/s, peak memory of each rank (MiB, largest first), MiB sent per step by each rank"
  cat "$out/bars.dat"
  grep "^bubble:" "$out/pipeline.txt"
} > "$out/table.txt"

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
plot "$out/bars.dat" using 3:xtic(1) title "rank 0 or largest" lc 2, "" using 4 title "the other rank" lc 3
set title "MiB sent per step, per rank"
plot "$out/bars.dat" using 5:xtic(1) title "rank 0" lc 4, "" using 6 title "rank 1" lc 5
unset multiplot
GNUPLOT
finish
