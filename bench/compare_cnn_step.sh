#!/usr/bin/env bash
# Side by side, in one run: the Keras MNIST CNN's training step at batch 128
# in ddl (bench/layers.cpp) and in PyTorch (bench/torch_cnn_step.py), for 1
# and 2 threads, alternating the two programs `rounds` times so both see the
# same machine load. Prints each measurement and the ratio of medians.
#
#   bench/compare_cnn_step.sh [build-dir] [rounds]
# Needs python3-torch and libopenblas0-pthread (bench/install-peers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread

for threads in 1 2; do
  ddl_ms=() torch_ms=()
  for ((r = 0; r < rounds; r++)); do
    ddl_ms+=("$("$build"/bench/ddl_bench_layers --threads "$threads" --reps 5 | awk '/training step/ {print $4}')")
    torch_ms+=("$(LD_LIBRARY_PATH=$openblas /usr/bin/python3 bench/torch_cnn_step.py --threads "$threads" \
      --repeats 5 | awk '/training step/ {print $3}')")
  done
  python3 - "$threads" "${ddl_ms[*]}" "${torch_ms[*]}" <<'PY'
import statistics, sys
threads, ddl, torch = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
d, t = statistics.median(ddl), statistics.median(torch)
print(f"threads {threads}: ddl {ddl} ms, pytorch {torch} ms")
print(f"threads {threads}: median ddl {d:.1f} ms ({128e3 / d:.0f} samples/s), pytorch {t:.1f} ms "
      f"({128e3 / t:.0f} samples/s), pytorch/ddl = {t / d:.2f}")
PY
done
