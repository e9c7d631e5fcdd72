#!/usr/bin/env bash
# Side by side, in one run on one GPU: resnet_small's training step at a
# batch where the GPU is the bottleneck, in ddl (bench/gpu_step.cpp) and in
# PyTorch 2.x (bench/torch_gpu_step.py), each with deterministic cuDNN
# algorithms (ddl's default) and with the fastest: PyTorch's
# cudnn.benchmark (its tuning guide's advice), which times the algorithms
# at the first step, against ddl's DDL_CUDA_CONV=benchmark, which does the
# same; one more ddl row, ddl-fastest, takes cuDNN's heuristic's first
# choice without timing (DDL_CUDA_CONV=fastest). Both do plain
# float32 arithmetic there (ddl asks cuDNN for CUDNN_FMA_MATH and leaves
# cuBLAS at its default math), so PyTorch runs with --no-tf32; one more row,
# torch-tf32, shows PyTorch's default (TF32 tensor cores in convolutions) and
# is not in the ratios. Rounds rotate the order of the programs, so all see
# the same state of the machine; the medians over rounds are printed, with
# ddl's speed against PyTorch's.
#
#   bench/compare_gpu_step.sh [build-dir] [rounds] [batch]
#
# PyTorch is whatever `python3 -c 'import torch'` finds (PYTHON= to choose);
# it must see the GPU.
set -euo pipefail
export LC_ALL=C  # sort -g and printf read numbers by the locale
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
batch=${3:-512}
python=${PYTHON:-python3}
[[ -x $build/bench/ddl_bench_gpu_step ]] || { echo "compare_gpu_step: no $build/bench/ddl_bench_gpu_step (build with CUDA first)" >&2; exit 2; }
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  { echo "compare_gpu_step: $python has no PyTorch that sees a GPU" >&2; exit 2; }

# One run of `program`: its "training step" line.
measure() {
  case $1 in
    ddl) "$build"/bench/ddl_bench_gpu_step --batch "$batch" ;;
    ddl-fastest) DDL_CUDA_CONV=fastest "$build"/bench/ddl_bench_gpu_step --batch "$batch" ;;
    ddl-benchmark) DDL_CUDA_CONV=benchmark "$build"/bench/ddl_bench_gpu_step --batch "$batch" ;;
    torch) "$python" bench/torch_gpu_step.py --batch "$batch" --deterministic --no-tf32 ;;
    torch-fastest) "$python" bench/torch_gpu_step.py --batch "$batch" --no-tf32 ;;
    torch-tf32) "$python" bench/torch_gpu_step.py --batch "$batch" ;;
  esac | grep '^training step'
}

programs=(ddl torch ddl-benchmark torch-fastest ddl-fastest torch-tf32)
declare -A lines=()
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#programs[@]}; i++)); do
    program=${programs[(i + r) % ${#programs[@]}]}
    lines[$program]+="$(measure "$program")"$'\n'
  done
done
# (sed, not head: head would close the pipe on the program's next line)
"$python" bench/torch_gpu_step.py --batch "$batch" --steps 1 --repeats 1 | sed -n '1s/^/# /p'
printf '%-14s %10s %12s %12s\n' program "step ms" samples/s "peak MiB"
# The median of column $1 of a program's lines.
median() { awk -v f="$1" '{ print $f }' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A medians=()
for program in "${programs[@]}"; do
  # "training step: X ms (best B), S samples/s, peak memory M MiB, ..."
  ms=$(printf '%s' "${lines[$program]}" | median 3)
  medians[$program]=$ms
  printf '%-14s %10s %12s %12s\n' "$program" "$ms" "$(printf '%s' "${lines[$program]}" | median 7)" \
    "$(printf '%s' "${lines[$program]}" | median 11)"
done
awk -v a="${medians[torch]}" -v b="${medians[ddl]}" -v c="${medians[torch-fastest]}" -v d="${medians[ddl-benchmark]}" \
  'BEGIN { printf "ddl / torch speed (both float32, no TF32): %.2f deterministic, %.2f timed algorithms (benchmark)\n", a / b, c / d }'
