#!/usr/bin/env bash
# The README's claim for the main job (scripts/main-job.sh): about 92% test
# accuracy after 12 epochs over 2 ranks. Measured runs ended at 92.23% and
# 92.56% (docs/PERFORMANCE.md); seeds and kernels move it by a few tenths,
# so below 91.5% the claim fails. It takes about 15 minutes on 2 cores:
# run where DDL_LONG_TESTS=1 (scripts/run-tests.sh --all), reported as
# skipped otherwise.
#   main_job_accuracy.sh <build dir>
set -uo pipefail
build=$1
if [[ ${DDL_LONG_TESTS:-0} != 1 ]]; then
  echo "SKIPPED: the main job takes about 15 minutes; scripts/run-tests.sh --all (DDL_LONG_TESTS=1) runs it"
  exit 0
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
DDL_BUILD_DIR=$build "$(dirname "$0")/../../scripts/main-job.sh" > "$log" 2>&1 ||
  { cat "$log"; echo "FAIL: the main job exited $?"; exit 1; }
tail -n 3 "$log"
accuracy=$(sed -n 's/^test accuracy \([0-9.]*\)%.*over 2 ranks$/\1/p' "$log")
[[ -n $accuracy ]] || { echo "FAIL: no final line with the test accuracy"; exit 1; }
awk -v a="$accuracy" 'BEGIN { exit !(a >= 91.5) }' ||
  { echo "FAIL: the main job reached $accuracy%, the README says about 92% (at least 91.5%)"; exit 1; }
echo "ok: the main job reached $accuracy% (the README says about 92%)"
