#!/usr/bin/env bash
# Side by side, in one run: the Keras MNIST CNN's training step at batch 128
# in ddl (bench/layers.cpp, --step-only) and in its peers, for 1 and 2
# threads. Each round runs every program once, in an order that rotates from
# round to round, so all of them see the same machine load; the medians of
# the rounds and ddl's speed against the fastest peer are printed.
#
#   bench/compare_cnn_step.sh [build-dir] [rounds] [threads...]
#
# Peers (bench/install-peers.sh installs them):
#   keras      Keras 3 / tensorflow-cpu (oneDNN), bench/keras_cnn_step.py,
#              NHWC, XLA off, intra-op = threads, inter-op 1
#   torch      PyTorch 2.x from PyPI (MKL + oneDNN), bench/torch_cnn_step.py
#              --channels-last, interop 1, glibc malloc keeping freed memory
#   torch1.13  Debian's python3-torch on OpenBLAS (the extra column)
# With PRECISION=bf16 the programs train in bf16 mixed precision instead
# (ddl's DDL_CPU_PRECISION=bf16, Keras's mixed_bfloat16 policy, PyTorch's
# torch.autocast), torch 1.13 gives way to ddl in float32 (the speed-up).
# With CONV=<DDL_CPU_CONV value> (e.g. ddl-winograd: ddl's own Winograd
# kernels where oneDNN has one, on AVX-512) ddl also runs under that
# setting, a column of its own in the same rounds, at PRECISION's
# precision (under bf16 ddl's own Winograd never runs: float32 only).
# ddl-winograd runs the 1->32 layer on ddl's Winograd too, where `auto`
# never would, so its column is not `auto` with ddl's kernels preferred
# (docs/PERFORMANCE.md, the Zen 5 section, says how that was compared).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
thread_counts=("$@")
((${#thread_counts[@]})) || thread_counts=(1 2)
venv=bench/.venv-peers/bin/python3
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
tunables=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
[[ -x $build/bench/ddl_bench_layers ]] || { echo "compare_cnn_step: no $build/bench/ddl_bench_layers (build first)" >&2; exit 2; }
[[ -x $venv ]] || { echo "compare_cnn_step: no $venv (run bench/install-peers.sh)" >&2; exit 2; }

bf16=${PRECISION:-float32}
[[ $bf16 == float32 || $bf16 == bf16 ]] || { echo "compare_cnn_step: PRECISION=$bf16 is not float32 or bf16" >&2; exit 2; }
keras_bf16=() torch_bf16=()
[[ $bf16 == bf16 ]] && keras_bf16=(--mixed-bfloat16) torch_bf16=(--autocast-bf16)

conv=${CONV:-}
if [[ -n $conv ]]; then
  # A one-image step, for ddl's own message on a setting it does not know.
  if ! message=$(DDL_CPU_CONV=$conv "$build"/bench/ddl_bench_layers --step-only --threads 1 --reps 1 --batch 1 2>&1); then
    echo "compare_cnn_step: CONV=$conv: $(grep -m1 DDL_CPU_CONV <<< "$message" || tail -n 3 <<< "$message")" >&2
    exit 2
  fi
fi

# One measurement of `program` at `threads`, in ms.
measure() {
  local program=$1 threads=$2
  case $program in
    ddl | ddl-float32 | ddl-conv)
      DDL_CPU_PRECISION=$([[ $program == ddl-float32 ]] && echo float32 || echo "$bf16") \
        DDL_CPU_CONV=$([[ $program == ddl-conv ]] && echo "$conv" || echo "${DDL_CPU_CONV:-auto}") \
        "$build"/bench/ddl_bench_layers --step-only --threads "$threads" --reps 10 | awk '/training step/ {print $4}' ;;
    keras) "$venv" bench/keras_cnn_step.py --threads "$threads" --repeats 10 "${keras_bf16[@]}" 2>/dev/null |
             awk '/training step/ {print $3}' ;;
    torch) GLIBC_TUNABLES=$tunables "$venv" bench/torch_cnn_step.py --step-only --channels-last \
             --threads "$threads" --repeats 10 "${torch_bf16[@]}" | awk '/training step/ {print $3}' ;;
    torch1.13) LD_LIBRARY_PATH=$openblas /usr/bin/python3 bench/torch_cnn_step.py --step-only \
                 --threads "$threads" --repeats 10 | awk '/training step/ {print $3}' ;;
  esac
}

programs=(ddl keras torch torch1.13)
[[ $bf16 == bf16 ]] && programs=(ddl keras torch ddl-float32)
[[ -n $conv ]] && programs+=(ddl-conv)
for threads in "${thread_counts[@]}"; do
  declare -A times=()
  for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < ${#programs[@]}; i++)); do
      program=${programs[(i + r) % ${#programs[@]}]}
      times[$program]+="$(measure "$program" "$threads") "
    done
  done
  columns=()
  for program in "${programs[@]}"; do columns+=("${times[$program]}"); done
  python3 - "$threads" "${programs[*]}" "$conv" "${columns[@]}" <<'PY'
import statistics, sys
threads, conv = sys.argv[1], sys.argv[3]
names = sys.argv[2].split()
runs = {n: [float(x) for x in v.split()] for n, v in zip(names, sys.argv[4:])}
med = {n: statistics.median(v) for n, v in runs.items()}
for n in names:
    print(f"threads {threads}: {n:<10} {med[n]:7.1f} ms ({128e3 / med[n]:5.0f} samples/s)  runs {runs[n]}")
fastest = min(("keras", "torch"), key=lambda n: med[n])
print(f"threads {threads}: ddl vs the fastest peer ({fastest}): {med[fastest] / med['ddl']:.2f}x")
if "ddl-float32" in med:
    print(f"threads {threads}: ddl in bf16 vs ddl in float32: {med['ddl-float32'] / med['ddl']:.2f}x")
if "ddl-conv" in med:
    print(f"threads {threads}: ddl under DDL_CPU_CONV={conv} vs the fastest peer ({fastest}): "
          f"{med[fastest] / med['ddl-conv']:.2f}x; vs ddl as set: {med['ddl'] / med['ddl-conv']:.2f}x")
PY
  unset times
done
