#!/usr/bin/env bash
# Lesson 9: hyper-parameter search, the third kind of parallelism. Trying a
# grid of configurations needs no communication between them, so the ranks
# can train different configurations at once (groups of one rank each) as
# well as one configuration faster (a data-parallel group of all ranks).
# Runs ddl-train --search over learning rate x batch size for mnist_cnn on
# 1 process, on 2 ranks in 2 groups of 1 and on 2 ranks in 1 group of 2,
# and compares the wall time of the whole search (docs/lessons/09-hyperparameter-search.md).
#
#   lessons/09-hyperparameter-search.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=09-hyperparameter-search
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot

if ((quick)); then
  grid="lr=0.5,1;batch-size=128" samples=$(scaled 512)  # --scale: training images
else
  grid="lr=0.3,1,3;batch-size=64,128" samples=$(scaled 6400)
fi
common=(--search "$grid" --epochs 1 --train-limit "$samples" --test-limit 1000 --threads 1 --prefetch 0)
# run_search NAME RANKS [ddl-train options]: one whole search, timed from the shell.
run_search() {
  local name=$1 ranks=$2 start
  shift 2
  echo "$lesson: $name"
  start=$(date +%s.%N)
  mpiexec -n "$ranks" "$build/apps/ddl-train" "${common[@]}" "$@" > "$out/$name.txt" 2>&1 ||
    { cat "$out/$name.txt" >&2; exit 1; }
  awk -v s="$start" -v e="$(date +%s.%N)" -v n="$name" 'BEGIN { printf "%s %.1f\n", n, e - s }' >> "$out/walls.dat"
}
: > "$out/walls.dat"
run_search 1-process 1
run_search 2-groups-of-1 2
run_search 1-group-of-2 2 --group-size 2

{
  echo "# search, wall seconds of the whole search (from the shell, start-up and data loading included)"
  cat "$out/walls.dat"
  for name in 1-process 2-groups-of-1 1-group-of-2; do
    echo "# $name"
    sed -n '/^ *lr /,/^the search took/p' "$out/$name.txt"
  done
} > "$out/table.txt"
# lr, batch size, validation accuracy of each configuration, from the 1-process search
awk '/^ *lr / { on = 1; next } on && /^ +[0-9.]+ +[0-9]+ +[0-9.]+/ { print $1, $2, $3 }' "$out/1-process.txt" \
  > "$out/grid.dat"
[[ $(wc -l < "$out/grid.dat") -ge 2 ]] || { echo "$lesson: the 1-process search printed no table" >&2; exit 1; }

# The claims. Groups of one never communicate, so each configuration must
# train exactly as it does alone: the same table, number for number
# (timing-free). That they train at once is checked on a ratio measured
# inside each search, the configurations' own training times over the
# search's wall time: two processes that run side by side both count the
# seconds they share, whatever the load, so the ratio is near 2x one
# process's (1.8-2.2x here; 1.5x asked, as rank 0's share of the grid can
# be the longer one). Which search finishes first is shown, not checked: in
# the quick run start-up and loading take half of it, and a busy machine
# takes the second core the groups need.
# lr, batch size, accuracy of each configuration of the search $1
grid() { awk '/^ *lr / { on = 1; next } on && /^ +[0-9.]+ +[0-9]+ +[0-9.]+/ { print $1, $2, $3 }' "$out/$1.txt"; }
# configurations in both tables, and the largest difference of their accuracies
read -r both largest < <(join -j1 <(grid 1-process | awk '{ print $1 "/" $2, $3 }' | sort) \
  <(grid 2-groups-of-1 | awk '{ print $1 "/" $2, $3 }' | sort) |
  awk '{ d = $2 - $3; d = d < 0 ? -d : d; if (d > m) m = d; n++ } END { print n + 0, m + 0 }')
claim "groups of one train every configuration exactly as one process does (the same accuracies)" \
  "configurations >= 2 && both == configurations && largest == 0" configurations="$(grid 1-process | wc -l)" both="$both" largest="$largest"
overlap() {
  sed -n "s/^the search took \([0-9.]*\) s; its .* add up to \([0-9.]*\) s$/\2 \1/p" "$out/$1.txt" |
    awk '$2 > 0 { printf "%.3f", $1 / $2 }'
}
claim "2 groups of 1 train configurations at once (their training time over the search's wall time, against one process's)" \
  "groups > 1.5 * one" one="$(overlap 1-process)" groups="$(overlap 2-groups-of-1)"

gnuplot <<GNUPLOT
$(figure_preamble 1400 500)
set multiplot layout 1,2 title "Hyper-parameter search over learning rate x batch size: mnist_cnn, Adadelta, one epoch each"
set title "wall time of the whole search"
set style data histograms
set style fill solid 0.8 border -1
set ylabel "seconds"
set yrange [0:*]
plot "$out/walls.dat" using 2:xtic(1) notitle lc 1
set title "test accuracy of each configuration"
set style data linespoints
set logscale x
set xlabel "learning rate"
set ylabel "test accuracy"
set yrange [*:*]
set key bottom right
plot "< awk '\$2 == 64' $out/grid.dat" using 1:3 lw 2 title "batch 64", \
     "< awk '\$2 == 128' $out/grid.dat" using 1:3 lw 2 title "batch 128"
unset multiplot
GNUPLOT
finish
