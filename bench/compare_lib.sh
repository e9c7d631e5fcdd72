# shellcheck shell=bash disable=SC2034  # the scripts read what this file sets
# Sourced by the side-by-side comparisons of parallel strategies
# (compare_sharding.sh, compare_tensor.sh): their shared arguments, the
# interleaved rounds, and the medians they report.
#
#   compare_start NAME "$@"   reads [build-dir] [rounds] [train-limit] [ranks]
#                             into build, rounds, limit, ranks; sets train
#                             (ddl-train), work (a directory removed on exit)
#                             and python (the peers' environment, if made)
#   run_rounds NAME CONFIG... runs `run CONFIG ROUND` (the script's) for every
#                             round, every configuration in turn, so each
#                             sees the same machine load
#   median_rate CONFIG        the median samples/s of its rounds (ddl-train's
#                             final line, or a peer's "; all steps R")
#   median_rss CONFIG         the median over the rounds of the largest
#                             rank's peak resident set, MiB
compare_start() {
  local name=$1
  shift
  build=${1:-build}
  rounds=${2:-3}
  limit=${3:-768}
  ranks=${4:-2}
  train=$build/apps/ddl-train
  [[ -x $train ]] || { echo "$name: no $train (build first)" >&2; exit 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  python=bench/.venv-peers/bin/python3
}

run_rounds() {
  local name=$1 round config
  shift
  for round in $(seq "$rounds"); do
    for config in "$@"; do
      echo "$name: round $round, $config" >&2
      run "$config" "$round" || { cat "$work/$config.$round" >&2; exit 1; }
    done
  done
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

median_rate() {
  local config=$1 f
  for f in "$work/$config".*; do
    if [[ $config == torch-* ]]; then
      sed -n 's/.*; all steps \([0-9.]*\)$/\1/p' "$f"
    else
      sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' "$f" | tail -1
    fi
  done | median
}

median_rss() {
  local f
  for f in "$work/rss.$1".*; do awk '/^maxrss/ { if ($2 > m) m = $2 } END { printf "%.0f\n", m / 1024 }' "$f"; done |
    median
}
