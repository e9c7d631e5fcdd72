#!/usr/bin/env bash
# ddl-model's command line: ddl_model_cli.sh <path to ddl-model>. Under
# mpiexec it measures and prints predicted beside measured times; alone it
# extrapolates from the given links; a bad unit is a usage error (exit 2).
set -uo pipefail
model=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mpiexec -n 2 "$model" --budget 0.01 --check-sizes 4096,65536 --sizes 4096,16777216 --ranks 8,64 \
  --gradient-mb 4.8 --step-ms 45 > "$work/out" 2>&1 || fail "mpiexec -n 2 ddl-model exited $?: $(cat "$work/out")"
for line in "measured here (2 ranks" "within a node    alpha" "predicted / measured allreduce time at 2 ranks" \
  "error |predicted / measured - 1|: median" "allreduce of 16 MiB" "rhd is faster below" \
  "p=4: bubble, speed-up"; do
  grep -qF -- "$line" "$work/out" || fail "no '$line' in: $(cat "$work/out")"
done
grep -qE "the ring (falls below|stays above) 90%" "$work/out" || fail "no verdict on the ring's efficiency"
echo "ok: under mpiexec, ddl-model fits the links and sets its predictions beside measurements"

# The sharded table: 4.8 MB is 1.2 M parameters; Adam's K = 8 gives 16 bytes
# each unsharded (18.3 MiB) and 16 / 64 at stage 3 on 64 ranks (293 KiB);
# stage 3 sends 1.5 times the others' bytes, so its efficiency is lower;
# with nothing hidden behind backward stages 1 and 2 cost what stage 0 does.
grep -qF "sharded data parallelism (ZeRO), ring: 1200000 float32 parameters, K = 8 bytes" "$work/out" ||
  fail "no sharded table: $(cat "$work/out")"
row=$(awk '/^sharded data parallelism/ { table = 1; next } table && $1 == "64" { print; exit }' "$work/out")
row=${row// KiB/KiB}
row=${row// MiB/MiB}
read -r ranks none _ _ parameters eff0 eff12 eff3 <<< "$row"
[[ $ranks == 64 && $none == 18.3MiB && $parameters == 293KiB ]] || fail "the 64-rank row: '$row'"
[[ $eff0 == "$eff12" ]] || fail "stages 1 and 2 cost more than stage 0 without overlap: '$row'"
awk -v a="${eff12%\%}" -v b="${eff3%\%}" 'BEGIN { exit !(b < a) }' || fail "stage 3 not below the others: '$row'"
echo "ok: ddl-model projects each ZeRO stage's state per rank and efficiency"

"$model" --no-measure --latency 5us --bandwidth 25GB/s --ranks-per-node 4 --ranks 16 --sizes 1048576 \
  > "$work/out" 2>&1 || fail "ddl-model alone exited $?: $(cat "$work/out")"
grep -q "between nodes alpha 5.0 us beta 0.04 ns/B (25 GB/s)" "$work/out" || fail "the given link is not used: $(cat "$work/out")"
grep -q "not measured" "$work/out" || fail "no note that nothing was measured"
grep -qF "give --gradient-mb and --step-ms" "$work/out" || fail "no hint for the efficiency table"
echo "ok: alone, ddl-model extrapolates from the links it is given"

# The 3-D grid: wide_mlp's shape does not fit 1 GB per rank under data
# parallelism; the grid the model picks at 64 ranks splits it over node-wide
# tensor groups and a pipeline.
"$model" --no-measure --gradient-mb 416 --pairs 4 --width 4096 --batch 1024 --sample-ms 10 --activation-kb 200 \
  --memory-gb 1 --ranks 64 > "$work/out" 2>&1 || fail "ddl-model's grid exited $?: $(cat "$work/out")"
grep -qF "3-D grid (dp x tp x pp" "$work/out" || fail "no 3-D grid table: $(cat "$work/out")"
row=$(awk '/^3-D grid/ { table = 1; next } table && $1 == "64" { print; exit }' "$work/out")
[[ $row == *"2 x 8 x 4 (M 32)"* && $row == *"(does not fit)"* ]] || fail "the 64-rank grid: '$row'"
"$model" --no-measure --ranks 16 > "$work/out" 2>&1 || fail "ddl-model without a grid model exited $?"
grep -qF "(the 3-D grid: give --gradient-mb, --pairs" "$work/out" || fail "no hint for the grid table"
echo "ok: ddl-model picks a 3-D grid that fits the memory, and says what it needs"

# The schedules' timelines as trace files: zb-h1 on 2 stages and 3
# micro-batches runs F, B and W of each micro-batch once per stage, 18
# spans in all, one unit (1 ms, 1000 us) each.
"$model" --no-measure --ranks 8 --draw 2,3 --draw-traces "$work/traces" > "$work/out" 2>&1 ||
  fail "ddl-model --draw-traces exited $?: $(cat "$work/out")"
grep -qF "the timelines as trace files: $work/traces/<schedule>.json" "$work/out" || fail "no trace line: $(cat "$work/out")"
python3 - "$work/traces/zb-h1.json" <<'PY' || fail "zb-h1's simulated trace"
import collections, json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
count = collections.Counter((e["pid"], e["name"], e["args"]["micro-batch"]) for e in spans)
assert len(spans) == 18 and set(count.values()) == {1}, count
assert {name for _, name, _ in count} == {"forward", "backward", "weight gradients"}, count
assert all(abs(e["dur"] - 1000.0) < 1e-6 for e in spans), [e["dur"] for e in spans]
PY
"$model" --no-measure --draw-traces "$work/traces" > "$work/out" 2> "$work/err"
[[ $? -eq 2 ]] && grep -q "draw" "$work/err" || fail "--draw-traces without --draw: $(cat "$work/err")"
echo "ok: ddl-model writes each schedule's simulated step as a trace file"

"$model" --no-measure --latency 2weeks > "$work/out" 2> "$work/err"
[[ $? -eq 2 ]] && grep -q "unknown unit 'weeks'" "$work/err" || fail "a bad unit: $(cat "$work/err")"
"$model" --no-measure --bandwidth 10Gb > "$work/out" 2> "$work/err"
[[ $? -eq 2 ]] && grep -q "expected a unit such as Gb/s" "$work/err" || fail "a bandwidth without /s: $(cat "$work/err")"
echo "ok: bad units are usage errors naming the text"
