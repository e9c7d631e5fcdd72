#!/usr/bin/env bash
# The pipeline's schedules side by side: wide_mlp (104 M parameters) at
# global batch 128 with SGD, 2 stages x 1 thread (balanced by parameters),
# for M micro-batches in `micro` (default 2 4 8), under gpipe and 1f1b
# (weight gradients once per batch, the default), 1f1b with them per
# micro-batch, zb-h1, zb-h2, interleaved-1f1b (2 chunks per rank), zb-v,
# 1f1b with each product packing its weight anew
# (--pack-weights off) and 1f1b recomputing each stage's activations
# (--recompute all), beside one process with 1 and with `ranks`
# threads, in `rounds` interleaved rounds so every configuration sees the
# same machine load. Per configuration: the median samples/s, the measured
# bubble (the stages' mean idle share of a step after the first) beside the schedule's
# formula, and each stage's peak activation MiB.
#
#   bench/compare_schedules.sh [build-dir] [rounds] [train-limit] [ranks] [micro...]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=compare_lib.sh source-path=SCRIPTDIR
source bench/compare_lib.sh
compare_start compare_schedules "$@"
shift $(($# < 4 ? $# : 4))
micro=("$@")
((${#micro[@]})) || micro=(2 4 8)

model=(--model wide_mlp --optimizer sgd --lr 0.01 --batch-size 128 --epochs 1 --train-limit "$limit" --test-limit 128
  --no-validation)
common=("${model[@]}" --threads 1 --parallel pipeline --balance parameters)
configs=(one-1 "one-$ranks")
for m in "${micro[@]}"; do configs+=("gpipe-$m" "1f1b-$m" "1f1b+w-$m" "zb-h1-$m" "zb-h2-$m" "interleaved-1f1b-$m" "zb-v-$m" "1f1b.unpacked-$m" "1f1b.recompute-$m"); done

run() {  # run <config> <round>
  local config=$1 out="$work/$1.$2" schedule=${1%-*} m=${1##*-} weights=batch pack=on extra=()
  if [[ $schedule == one ]]; then
    "$train" "${model[@]}" --threads "$m" > "$out" 2>&1
    return
  fi
  [[ $schedule == 1f1b+w ]] && schedule=1f1b weights=micro-batch
  [[ $schedule == 1f1b.unpacked ]] && schedule=1f1b pack=off
  [[ $schedule == 1f1b.recompute ]] && schedule=1f1b extra=(--recompute all)
  mpiexec -n "$ranks" /usr/bin/time -a -o "$work/rss.$1.$2" -f "maxrss %M" "$train" "${common[@]}" \
    --schedule "$schedule" --micro-batches "$m" --weight-gradients "$weights" --pack-weights "$pack" "${extra[@]}" > "$out" 2>&1
}

run_rounds compare_schedules "${configs[@]}"

printf "%-16s %10s %18s %18s %22s\n" "config" "samples/s" "bubble measured %" "bubble formula %" "activ. MiB per stage"
for config in "${configs[@]}"; do
  if [[ $config == one-* ]]; then
    printf "%-16s %10s %18s %18s %22s\n" "$config" "$(median_rate "$config")" - - -
    continue
  fi
  bubble=$(for f in "$work/$config".*; do sed -n 's/^bubble: \([0-9.]*\)% .*/\1/p' "$f"; done | median)
  formula=$(sed -n 's/^bubble: .* = \([0-9.]*\)% for .*/\1/p' "$work/$config.$rounds")
  activations=$(awk '/^pipeline stages/ { t = 1 } t && $1 ~ /^[0-9]+$/ && NF == 11 { printf "%s%s", sep, $5; sep = " / " }' \
    "$work/$config.$rounds")
  printf "%-16s %10s %18s %18s %22s\n" "$config" "$(median_rate "$config")" "$bubble" "$formula" "$activations"
done
