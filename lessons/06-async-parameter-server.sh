#!/usr/bin/env bash
# Lesson 6: synchronous against asynchronous parameter servers. A
# synchronous server waits for every worker and steps once on their average
# (the same steps as allreduce); an asynchronous one applies each worker's
# gradients as they arrive, so nobody waits, but a gradient may have been
# computed on weights several updates old (stale). --max-staleness bounds
# how far a worker may run ahead. Trains materials_mlp on 3 workers and 1
# server, synchronously and asynchronously with staleness bounds 0, 2 and
# 8, and compares throughput and test error (docs/lessons/06-async-parameter-server.md).
#
#   lessons/06-async-parameter-server.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=06-async-parameter-server
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot

if ((quick)); then
  epochs=1 samples=$(scaled 1500)  # --scale: the curves
else
  epochs=20 samples=$(scaled 20000)
fi
oversubscription 4 "what stale gradients cost in accuracy" "what asynchrony saves in time"
configs=("sync" "async-0 --async --max-staleness 0" "async-2 --async --max-staleness 2" "async-8 --async --max-staleness 8")
echo "# config, samples/s, final and best test MAE (standardised), per epoch in <config>.dat" > "$out/table.txt"
for config in "${configs[@]}"; do
  read -r name options <<< "$config"
  echo "$lesson: $name"
  rm -f "$out/$name.csv"
  # shellcheck disable=SC2086  # the options are words
  mpiexec -n 4 "$build/apps/ddl-train" --model materials_mlp --parallel ps --servers 1 --batch-per-rank 75 \
    --threads 1 --seed 1 --epochs "$epochs" --samples "$samples" $options --log-csv "$out/$name.csv" \
    > "$out/$name.txt" 2>&1 || { cat "$out/$name.txt" >&2; exit 1; }
  awk -F, 'NR > 1 { print $1, $5 }' "$out/$name.csv" > "$out/$name.dat"
  samples_per_s=$(rate "$out/$name.txt")
  awk -v name="$name" -v rate="$samples_per_s" '{ if (best == "" || $2 < best) best = $2; last = $2 }
    END { printf "%s %s %.4f %.4f\n", name, rate, last, best }' "$out/$name.dat" >> "$out/table.txt"
done

# The claims, on the test error after a fixed number of epochs from one
# seed. The synchronous run's is the same every time; an asynchronous
# run's depends on the order the pushes arrive in, which the scheduler
# decides, so the margins are set from repeated quick runs on this busy
# machine: asynchronous runs ended 1.6-3.6x the synchronous error (1.2x
# asked), and the bound of 0 10-50% below the mean of bounds 2 and 8
# (below asked).
final() { cell "$out/table.txt" "$1" 3; }
claim "stale gradients cost accuracy: every asynchronous run ends with a larger test error than the synchronous one" \
  "async_0 > 1.2 * sync && async_2 > 1.2 * sync && async_8 > 1.2 * sync" \
  sync="$(final sync)" async_0="$(final async-0)" async_2="$(final async-2)" async_8="$(final async-8)"
claim "the more staleness is allowed, the worse: bound 0 ends better than bounds 2 and 8 on average" \
  "async_0 < (async_2 + async_8) / 2" async_0="$(final async-0)" async_2="$(final async-2)" async_8="$(final async-8)"

gnuplot <<GNUPLOT
$(figure_preamble 1000 520)
set logscale y
set key top right
set title "Parameter server, 3 workers + 1 server: materials_mlp, 75 samples per worker step"
set xlabel "epoch"
set ylabel "test MAE of the 2 parameters (standardised)"
plot for [c in "sync async-0 async-2 async-8"] "$out/".c.".dat" using 1:2 with lines lw 2 title c
GNUPLOT
finish
