#!/usr/bin/env bash
# Lesson 10: sharded data parallelism (ZeRO, FSDP). Data parallelism keeps
# the whole training state on every rank: P parameters, P gradients and K
# bytes of optimizer state per parameter. ZeRO's stages keep 1/N of the
# optimizer state (stage 1), of the gradients too (stage 2) and of the
# parameters too (stage 3) on each of N ranks, for the traffic of data
# parallelism's ring (stages 1 and 2: a reduce-scatter and an allgather,
# 2 (N - 1) / N P floats per rank) or 1.5 times it (stage 3 gathers the
# parameters for backward again). Trains mnist_cnn with Adam on N = 2, 3
# and 4 ranks at every stage and reads what each rank held and sent from
# ddl-train's report (docs/lessons/10-sharded-data-parallelism.md).
#
#   lessons/10-sharded-data-parallelism.sh [--quick] [--scale K] [--build DIR] [--out DIR]
lesson=10-sharded-data-parallelism
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$(dirname "$0")/common.sh"
parse_lesson_options "$@"
require "$build/apps/ddl-train" mpiexec gnuplot

samples=$(scaled "$([[ $quick == 1 ]] && echo 480 || echo 2400)")  # --scale: training images; batch 120 divides over 2, 3 and 4 ranks
if ((quick)); then ranks=(2 4); else ranks=(2 3 4); fi
stages=(none optimizer gradients parameters)
oversubscription "${ranks[-1]}" "the state each rank holds and the bytes it sends" "a speed-up"

# One row per run: ranks, stage, then from the report the largest rank's
# parameter, gradient and optimizer MiB, ZeRO's formula's three (MiB), the
# MiB the ranks sent per step together, the largest peak RSS (MiB).
: > "$out/runs.dat"
for n in "${ranks[@]}"; do
  for stage in "${stages[@]}"; do
    echo "$lesson: $n ranks, sharding $stage"
    log=$out/$n-$stage.txt
    mpiexec -n "$n" "$build/apps/ddl-train" --model mnist_cnn --optimizer adam --parallel data --allreduce ring \
      --shard "$stage" --threads 1 --batch-size 120 --epochs 1 --train-limit "$samples" --test-limit 128 \
      --no-validation > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
    awk -v n="$n" -v stage="$stage" '
      /^training state per rank/ { rows = 1; next }
      rows && $1 == "rank" { next }
      rows && $1 ~ /^[0-9]+$/ && NF == 7 {
        if ($2 > p) p = $2; if ($3 > g) g = $3; if ($4 > o) o = $4
        rss = $6; sub("M", "", rss); if (rss + 0 > peak) peak = rss + 0
        sent += $7; next }
      rows { rows = 0 }
      /^ZeRO.s formula/ { split($0, parts, ": "); gsub(/ and|,| MiB/, "", parts[2]); formula = parts[2] }
      END { printf "%d %s %.2f %.2f %.2f %s %.2f %.0f\n", n, stage, p, g, o, formula, sent, peak }' "$log" \
      >> "$out/runs.dat"
  done
done
params=$(sed -n 's/^Total params: //p' "$out/${ranks[0]}-none.txt" | tr -d ,)
mib() { awk -v b="$1" 'BEGIN { printf "%.4f", b / 1048576 }'; }
whole=$(mib "$((params * 4))")  # P floats

{
  echo "# mnist_cnn ($params parameters, P = $whole MiB of float32), Adam (K = 8 bytes per parameter), ring"
  echo "# ranks, stage, the largest rank's params / grads / optim MiB, ZeRO's formula's (MiB), MiB sent per step by all ranks, the largest peak RSS MiB"
  cat "$out/runs.dat"
} > "$out/table.txt"

# The claims, on quantities that do not depend on time. What a rank holds:
# the formula's, up to the chunks' uneven sizes (a bucket of n values cut
# into N chunks of floor or ceil(n / N)) and the report's rounding to
# 0.01 MiB.
while read -r n stage p g o fp fg fo sent _; do
  claim "$n ranks, sharding $stage: each rank holds ZeRO's formula's parameters, gradients and optimizer state" \
    "p <= fp + 0.02 && g <= fg + 0.02 && o <= fo + 0.02 && p + g + o >= fp + fg + fo - 0.06" \
    p="$p" g="$g" o="$o" fp="$fp" fg="$fg" fo="$fo"
  # The ring sends each of a bucket's N chunks on N - 1 hops per phase:
  # (N - 1) P floats over the ranks; stage 3 has three phases, the others two.
  phases=$([[ $stage == parameters ]] && echo 3 || echo 2)
  claim "$n ranks, sharding $stage: a step sends $phases (N - 1) P floats over the ranks, counted by the transport" \
    "sent > 0.995 * expected - 0.01 * n && sent < 1.005 * expected + 0.01 * n" \
    sent="$sent" expected="$(awk -v k="$phases" -v n="$n" -v w="$whole" 'BEGIN { printf "%.4f", k * (n - 1) * w }')" n="$n"
done < "$out/runs.dat"
state() { awk -v n="$1" -v s="$2" '$1 == n && $2 == s { print $3 + $4 + $5 }' "$out/runs.dat"; }
small=${ranks[0]} large=${ranks[-1]}
claim "stage 3's state per rank falls as 1/N, stage 0's stays whole" \
  "s3_large * large < 1.02 * s3_small * small && s0_large > 0.99 * s0_small" \
  s3_small="$(state "$small" parameters)" s3_large="$(state "$large" parameters)" small="$small" large="$large" \
  s0_small="$(state "$small" none)" s0_large="$(state "$large" none)"

for stage in "${stages[@]}"; do
  awk -v s="$stage" '$2 == s { print $1, $3 + $4 + $5, $6 + $7 + $8, $9 / $1 }' "$out/runs.dat" > "$out/$stage.dat"
done
gnuplot <<GNUPLOT
$(figure_preamble 1300 500)
set multiplot layout 1,2 title "mnist_cnn with Adam: ZeRO's stages on N ranks (ring)"
stages = "none optimizer gradients parameters"
set xlabel "ranks (N)"
set xtics 1
set key below
set yrange [0:*]
set ylabel "MiB"
set title "training state per rank: measured (points), ZeRO's formula (lines)"
plot for [i = 1:4] "$out/".word(stages, i).".dat" using 1:3 with lines lw 2 lc i title word(stages, i), \
     for [i = 1:4] "$out/".word(stages, i).".dat" using 1:2 with points pt 7 ps 1.5 lc i notitle
set title "sent per step per rank: 2 (N-1)/N P, stage 3 3 (N-1)/N P"
plot for [i = 1:4] "$out/".word(stages, i).".dat" using 1:4 with linespoints lw 2 pt 7 lc i title word(stages, i)
unset multiplot
GNUPLOT
finish
