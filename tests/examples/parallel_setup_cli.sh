#!/usr/bin/env bash
# The two examples that assemble a run with parallel::make_setup, each under
# mpiexec with 2 ranks, one ctest test per case:
#   parallel_setup_cli.sh <example> <case: data|pipeline> <mpiexec>
# Each checks that the strategy asked for ran (its header line and its
# end-of-run report, from rank 0 alone) and that it learned: the test
# accuracy after 2 epochs on 4096 Fashion-MNIST samples clears 0.6 (one
# process reaches about 0.75 there; guessing is 0.1).
set -uo pipefail
program=$1
case_name=$2
mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

"$mpiexec" -n 2 "$program" > "$work/out" 2> "$work/err" || fail "$program exited $?: $(cat "$work/out" "$work/err")"
cat "$work/out"
case $case_name in
  data)
    grep -qx "data-parallel over 2 ranks (ring allreduce, 64 per rank)" "$work/out" || fail "no data-parallel header"
    [[ $(grep -c "^gradient synchronisation: .* of step time spent waiting" "$work/out") -eq 1 ]] ||
      fail "not exactly one synchronisation report"
    ;;
  pipeline)
    grep -q "^pipeline of 2 stages (1f1b, 4 micro-batches per batch, weight gradients per batch), balanced by parameters" \
      "$work/out" || fail "no pipeline header"
    [[ $(grep -c "^pipeline stages (peaks over the training steps):" "$work/out") -eq 1 ]] ||
      fail "not exactly one stage report"
    ;;
  *) fail "unknown case $case_name" ;;
esac
accuracy=$(sed -n 's/^test accuracy \([0-9.]*\)$/\1/p' "$work/out")
[[ $(grep -c "^test accuracy" "$work/out") -eq 1 ]] || fail "not exactly one accuracy line (rank 0 alone reports)"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.6) }' || fail "test accuracy $accuracy < 0.6"
echo "ok: $case_name over 2 ranks, test accuracy $accuracy"
