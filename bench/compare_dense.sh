#!/usr/bin/env bash
# Side by side, in one run: the Dense layers' products of wide_mlp and
# mnist_cnn (bench/dense.cpp) in ddl and in PyTorch 2 (bench/torch_dense.py),
# forward and forward + backward, for each thread count. Each round runs
# both programs, in an order that alternates from round to round; the
# medians of the rounds and ddl's speed against PyTorch are printed as a
# markdown table.
#
#   bench/compare_dense.sh [build-dir] [rounds] [threads, comma-separated]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
threads=${3:-1,2}
venv=bench/.venv-peers/bin/python3
[[ -x $build/bench/ddl_bench_dense ]] || { echo "compare_dense: no $build/bench/ddl_bench_dense (build first)" >&2; exit 2; }
[[ -x $venv ]] || { echo "compare_dense: no $venv (run bench/install-peers.sh)" >&2; exit 2; }
results=$(mktemp)
trap 'rm -f "$results"' EXIT

# Appends "program layer pass threads ms" lines.
measure() {
  case $1 in
    ddl) "$build"/bench/ddl_bench_dense --threads "$threads" --reps 10 ;;
    torch) "$venv" bench/torch_dense.py --threads "$threads" --repeats 10 ;;
  esac | awk -v p="$1" '$2 == "forward" || $2 == "fwd+bwd" {print p, $1, $2, $3, $4}' >> "$results"
}

for ((r = 0; r < rounds; r++)); do
  if ((r % 2 == 0)); then measure ddl; measure torch; else measure torch; measure ddl; fi
done

python3 - "$results" "$rounds" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    program, layer, kind, threads, ms = line.split()
    runs[(program, layer, kind, int(threads))].append(float(ms))
print(f"medians of {sys.argv[2]} rounds, ms (ddl's speed against PyTorch's: torch ms / ddl ms)\n")
print("| layer | pass | threads | ddl | PyTorch | ddl vs PyTorch |")
print("| --- | --- | --- | --- | --- | --- |")
for (program, layer, kind, threads), values in runs.items():
    if program != "ddl":
        continue
    ddl, torch = statistics.median(values), statistics.median(runs[("torch", layer, kind, threads)])
    print(f"| {layer} | {kind} | {threads} | {ddl:.3f} | {torch:.3f} | {torch / ddl:.2f}x |")
PY
