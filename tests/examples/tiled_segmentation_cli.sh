#!/usr/bin/env bash
# The tiled_segmentation example end to end, one case per ctest test:
#   tiled_segmentation_cli.sh <path to tiled_segmentation> <case> [mpiexec]
# Each case prints what it checked and exits non-zero with the reason when a
# check fails.
set -uo pipefail
program=$(realpath "$1")
case_name=$2
mpiexec=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

fail() { echo "FAIL: $*"; exit 1; }

# A small, quick run: few images, one short epoch, a modest image.
quick=(--epochs 1 --samples 64 --train-size 32 --height 90 --width 110)

# Runs the command in "$@"; expects exit code 2 before any training, one line
# on stderr containing $1 (the first argument), and no PNG written.
expect_refusal() {
  local text=$1
  shift
  "$@" > out 2> all-err
  local rc=$?
  grep -v "^ddl: no CUDA device" all-err > err
  [[ $rc -eq 2 ]] || fail "$* exited $rc, expected 2; stderr: $(cat err)"
  [[ $(wc -l < err) -eq 1 ]] || fail "$*: expected one line on stderr, got: $(cat err)"
  grep -qF -- "$text" err || fail "$*: stderr lacks '$text': $(cat err)"
  ! grep -q "^Epoch" out || fail "$*: trained before refusing"
  [[ ! -e tiled_segmentation ]] || fail "$*: wrote files before refusing"
  echo "ok: $* -> exit 2, '$(cat err)'"
}

# The run's PNG files exist and start with the PNG signature.
check_pngs() {
  for name in input mask prediction; do
    [[ $(head -c 8 "tiled_segmentation/$name.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
      fail "tiled_segmentation/$name.png is missing or not a PNG"
  done
}

# The stitched output's largest difference from the whole image, relative to
# its largest logit, is at most 1e-6 (float32 rounding in the convolutions).
check_exact() {
  local difference
  difference=$(sed -n 's/.*largest difference \([^ ]*\) of the largest logit.*/\1/p' out)
  [[ -n $difference ]] || fail "no comparison with the whole image in: $(cat out)"
  awk -v d="$difference" 'BEGIN { exit !(d <= 1e-6) }' || fail "tiled differs from the whole image by $difference"
  echo "ok: tiled equals the whole image to $difference"
}

case $case_name in
  refusals)
    expect_refusal "a halo of 14 pixels is too small for this model, whose receptive field is 31x31 pixels" \
      "$program" "${quick[@]}" --halo 14
    expect_refusal "exact tiles need 15 above, 15 below, 15 left, 15 right" "$program" "${quick[@]}" --halo 14
    expect_refusal "a grid of 91 rows needs an output at least 91 pixels wide that way" \
      "$program" "${quick[@]}" --grid 91x2
    expect_refusal "a window of 20 input rows is too small" "$program" "${quick[@]}" --window 20x40
    expect_refusal "cannot hold even a tile of one output pixel, which reads 31x31 input pixels" \
      "$program" "${quick[@]}" --memory-budget-mib 0.01
    expect_refusal "--grid '2by2': expected ROWSxCOLUMNS" "$program" "${quick[@]}" --grid 2by2
    expect_refusal "cpu:9 does not exist" "$program" "${quick[@]}" --devices cpu:1,cpu:9
    expect_refusal "excludes" "$program" "${quick[@]}" --grid 2x2 --tile 10x10
    ;;
  devices)
    "$program" "${quick[@]}" --grid 3x2 --devices cpu:1,cpu:2,cpu:3 > out 2> err || fail "exited $?: $(cat err)"
    grep -qF "3x2 tiles" out || fail "no 3x2 plan in: $(cat out)"
    [[ $(grep -c "^tile [0-9]/6" out) -eq 6 ]] || fail "expected progress for 6 tiles in: $(cat out)"
    check_exact
    check_pngs
    # The encoder-decoder variant: tiles start on even pixels; odd sizes are
    # refused before training.
    rm -rf tiled_segmentation
    "$program" "${quick[@]}" --model pooled_context_net --grid 2x3 > out 2> err || fail "exited $?: $(cat err)"
    grep -qF "tiles aligned to 2x2" out || fail "no alignment in the plan: $(cat out)"
    check_exact
    check_pngs
    rm -rf tiled_segmentation
    expect_refusal "turns a 91x110 image into 90x110 outputs" "$program" "${quick[@]/#90/91}" \
      --model pooled_context_net
    ;;
  ranks)
    "$mpiexec" -n 2 "$program" "${quick[@]}" --grid 2x3 > out 2> err || fail "exited $?: $(cat err)"
    check_exact
    check_pngs
    # The same refusal on both ranks, printed once.
    "$mpiexec" -n 2 "$program" "${quick[@]}" --halo 3 > out 2> err
    rc=$?
    [[ $rc -eq 2 ]] || fail "mpiexec -n 2 --halo 3 exited $rc, expected 2: $(cat err)"
    [[ $(grep -c "a halo of 3 pixels is too small" err) -eq 1 ]] || fail "expected the refusal once: $(cat err)"
    echo "ok: mpiexec -n 2 --halo 3 -> exit 2, '$(cat err)'"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
