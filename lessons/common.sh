# shellcheck shell=bash disable=SC2034  # the lessons read what this file sets
# Sourced by every lesson (lessons/NN-name.sh): the options they share, the
# checks of what they need, of what they wrote, and of their claims.
#
#   lessons/NN-name.sh [--quick] [--scale K] [--build DIR] [--out DIR]
#
# --quick runs a reduced experiment in seconds (what CI runs, so no lesson
# rots); without it the experiment takes minutes on 2 cores. --scale K
# multiplies the work (samples, epochs or message sizes, as the lesson
# says) by K, to go bigger on a bigger machine. --build is the build
# directory (default: build), --out where the table and figure go (default:
# lesson-output/NN-name). Every run, quick or full, ends by checking the
# lesson's claim on what it measured: "claim holds: ..." for each part, or
# "claim does not hold: ..." with the numbers, and exit status 1.
set -euo pipefail
lesson=${lesson:?a lesson sets its name before it sources common.sh}
cd "$(dirname "${BASH_SOURCE[0]}")/.."

quick=0
scale=1
build=build
out=""

parse_lesson_options() {
  while (($#)); do
    case $1 in
      --quick) quick=1 ;;
      --build) build=${2:?--build needs a directory}; shift ;;
      --out) out=${2:?--out needs a directory}; shift ;;
      --scale)
        scale=${2:?--scale needs a factor}
        if ! [[ $scale =~ ^[0-9]*\.?[0-9]+$ ]] || ! awk -v s="$scale" 'BEGIN { exit !(s > 0) }'; then
          echo "$lesson: --scale needs a positive number, got '$scale'" >&2
          exit 2
        fi
        shift ;;
      -h | --help)
        awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
        awk 'NR > 4 && /^#/ { sub(/^# ?/, ""); print; next } NR > 4 { exit }' "${BASH_SOURCE[0]}"
        exit 0 ;;
      *) echo "$lesson: unknown option $1 (--quick, --scale K, --build DIR, --out DIR)" >&2; exit 2 ;;
    esac
    shift
  done
  out=${out:-lesson-output/$lesson}
  mkdir -p "$out"
}

# What ddl-train printed in the log file $1: the training throughput of its
# final line ("...; 3 epoch(s) in 4.1 s, 8123 samples/s"), and the share of
# step time a data-parallel run waited for gradients.
rate() { sed -n 's/.*epoch(s) in .* \([0-9][0-9]*\) samples\/s.*/\1/p' "$1"; }
waiting() { sed -n 's/^gradient synchronisation: \([0-9.]*\)%.*/\1/p' "$1"; }

# The value in column COLUMN of the row of FILE whose first field is KEY
# (the tables the lessons write): cell FILE KEY COLUMN.
cell() { awk -v k="$2" -v c="$3" '$1 == k { print $c }' "$1"; }

# The communication a data-parallel efficiency (in percent) leaves, in
# steps: step / (step + communication) = efficiency, so 100 / efficiency - 1.
# Its ratios do not depend on the step time measured on a busy machine.
# Nothing for no efficiency (a row the table lacks), so the claim fails.
communication_in_steps() { [[ -n $1 ]] && awk -v e="$1" 'BEGIN { printf "%.5f", 100 / e - 1 }'; }

# N times --scale, rounded, at least 1.
scaled() { awk -v n="$1" -v s="$scale" 'BEGIN { v = int(n * s + 0.5); print (v < 1 ? 1 : v) }'; }

require() {
  local what
  for what in "$@"; do
    if [[ $what == */* ]]; then
      [[ -x $what ]] || { echo "$lesson: no $what (build ddl first: scripts/build.sh)" >&2; exit 2; }
    else
      command -v "$what" > /dev/null || { echo "$lesson: needs $what (scripts/install-deps.sh installs it)" >&2; exit 2; }
    fi
  done
}

# The first lines of every lesson's gnuplot script: a PNG of WIDTH x
# HEIGHT pixels at $out/figure.png, titles as written (no enhanced-text
# markup: model names hold underscores), a grid.
figure_preamble() {
  printf 'set terminal pngcairo noenhanced size %s,%s font "sans,10"\nset output "%s"\nset grid\n' "$1" "$2" \
    "$out/figure.png"
}

# claim WHAT CONDITION NAME=NUMBER...: checks one of the lesson's claims,
# in every run (quick or full), on the numbers the experiment produced.
# CONDITION is an awk expression over the NAMEs, e.g.
#   claim "1F1B holds fewer activations than GPipe" "onef < 0.8 * gpipe" onef=40.1 gpipe=63.2
# prints "claim holds: WHAT (the numbers)" or, on stderr, "claim does not
# hold: WHAT: CONDITION is false for the numbers", and finish then fails
# the lesson. A value that is not a
# number (a line the lesson failed to parse) fails the claim: an empty
# string would compare as 0, and a claim must not hold by accident.
failed_claims=0
claim() {
  local what=$1 condition=$2 pair
  shift 2
  local -a vars=()
  for pair in "$@"; do
    if [[ ! $pair =~ ^[a-z_][a-z0-9_]*=-?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]]; then
      echo "$lesson: claim does not hold: $what: no number for ${pair%%=*} (got '${pair#*=}')" >&2
      failed_claims=$((failed_claims + 1))
      return 0
    fi
    case ${pair%%=*} in
      # awk's own names, which -v cannot set
      atan2 | close | cos | exp | getline | gsub | in | index | int | length | log | match | rand | sin | split | \
        sprintf | sqrt | srand | sub | substr | system | tolower | toupper)
        echo "$lesson: claim '$what' names a value ${pair%%=*}, which is awk's own" >&2
        exit 2 ;;
    esac
    vars+=(-v "$pair")
  done
  if awk "${vars[@]}" "BEGIN { exit !($condition) }"; then
    echo "$lesson: claim holds: $what ($*)"
  else
    echo "$lesson: claim does not hold: $what: $condition is false for $*" >&2
    failed_claims=$((failed_claims + 1))
  fi
}

# The cores this machine has, against which oversubscribed RANKS: more
# processes than cores share them, so what such a run measures is how the
# scheduler interleaves them, not what the ranks cost. Such a run still
# shows what does not depend on time (bytes, messages, the numbers
# trained); the lesson says which (CAN) and which it cannot (CANNOT).
cores=$(nproc)
oversubscription() {
  local ranks=$1 can=$2 cannot=$3
  ((ranks > cores)) || return 0
  echo "$lesson: note: up to $ranks processes on $cores cores; these runs show $can, not $cannot"
}

# What ddl-model (its output in file $1) measured here and fitted the model
# on, and how far the fit is from this machine's own times: a projection is
# only as good as these, so a lesson that projects prints them.
fitted_on() {
  grep -E "^  (within a node|between nodes|reduction) |error \|predicted" "$1" | sed "s/^ */$lesson: fitted on: /"
}

# The lesson's last step: its table and figure ($out/table.txt,
# $out/figure.png) exist and are what they claim to be, and every claim
# checked held.
finish() {
  local table=$out/table.txt figure=$out/figure.png
  [[ -s $table ]] || { echo "$lesson: the table $table is empty" >&2; exit 1; }
  [[ $(head -c 8 "$figure" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
    { echo "$lesson: $figure is not a PNG" >&2; exit 1; }
  echo "$lesson: table $table, figure $figure"
  ((failed_claims == 0)) || { echo "$lesson: $failed_claims claim(s) did not hold (above)" >&2; exit 1; }
}
