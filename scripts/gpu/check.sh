#!/usr/bin/env bash
# On a GPU machine, after scripts/gpu/bundle.sh here: the CUDA conformance
# suite, NCCL with one rank, the GPU cases of the unit suite and of the MPI
# suite on 2 ranks, ddl-train on the GPU (alone, placed across the CPU and
# the GPU, as a 2-stage pipeline, data-parallel on 2 ranks sharing it,
# unsharded and under ZeRO stage 3, and tensor-parallel), the conformance suite, a short
# ddl-train run and a stage-3 run on 2 ranks under compute-sanitizer's memcheck, the ctest suite (but what needs
# no GPU and cannot run there),
# ddl's training step against PyTorch's (bench/compare_gpu_step.sh) and
# where each one's step time goes, and last racecheck, initcheck and
# synccheck.
# Each step has a time limit, so a short device lease still gets the early
# steps' answers. Logs go to ${OUT:-/tmp/ddl-gpu}; $OUT/summary.txt gets
# one line per step as it ends, printed again at the end.
#   DDL_GPU_SANITIZER_LIMIT  seconds per sanitizer run (default 150)
#   DDL_GPU_CTEST_LIMIT      seconds for the ctest suite (default 300)
#   DDL_GPU_COMPARE_ROUNDS   rounds of the ddl/PyTorch comparison (default 2)
#   DDL_GPU_ONLY             an extended regular expression: only the steps
#                            whose names match it run (a short lease spent
#                            on what has not run yet), e.g. 'shard|tensor'
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/ddl-gpu}
mkdir -p "$out"
source scripts/gpu/setup.sh > "$out/setup.log" 2>&1
build=$(cat .gpu/build-path)
if [[ -n "${DDL_GPU_ONLY:-}" ]]; then
  [[ "" =~ $DDL_GPU_ONLY ]]
  (($? != 2)) || { echo "check.sh: DDL_GPU_ONLY='$DDL_GPU_ONLY' is not an extended regular expression" >&2; exit 2; }
fi
sanitizer_limit=${DDL_GPU_SANITIZER_LIMIT:-150}
: > "$out/summary.txt"

# step NAME LIMIT LOG 'WHAT TO QUOTE' COMMAND...: runs the command within
# LIMIT seconds into $out/LOG and records its exit status (124: out of time)
# with the last line of the log matching the pattern.
step() {
  local name=$1 limit=$2 log=$3 quote=$4
  shift 4
  if [[ -n "${DDL_GPU_ONLY:-}" ]] && ! [[ $name =~ $DDL_GPU_ONLY ]]; then
    echo "$name: not run (DDL_GPU_ONLY=$DDL_GPU_ONLY)" >> "$out/summary.txt"
    return
  fi
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$out/$log" 2>&1
  local status=$?
  local line="$name: exit $status in $((SECONDS - start)) s"
  ((status == 124)) && line+=" (stopped at the ${limit} s limit)"
  line+=" | $(grep -E "$quote" "$out/$log" | tail -n 1)"
  echo "$line" | tee -a "$out/summary.txt"  # kept if the whole run is stopped
}

nvidia-smi -L
export DDL_STALL_TIMEOUT=60
train=("$build/apps/ddl-train" --device cuda --threads 4)
step "conformance" 120 conformance.log 'assertions:|SKIPPED' "$build/tests/ddl_cuda_conformance"
step "NCCL, 1 rank" 120 nccl.log 'test cases:' mpiexec -n 1 "$build/tests/ddl_mpi_nccl_tests"
# The GPU cases of the unit and MPI suites (layers against the CPU,
# placement and tiles across devices; buckets and activations staged
# through pinned host memory), which the ctest step below may not reach in
# its time: doctest's test suite "cuda" (tests/support/skip.hpp).
gpu_cases=--test-suite=cuda
step "unit suite: the CUDA cases" 150 unit-gpu.log 'test cases:' \
  env DDL_CPU_DEVICES=2 "$build/tests/ddl_tests" "$gpu_cases"
step "MPI, 2 ranks sharing the GPU: the CUDA cases" 150 mpi-gpu.log 'test cases:' \
  env DDL_CPU_DEVICES=2 mpiexec -n 2 "$build/tests/ddl_mpi_tests" "$gpu_cases"
step "ddl-train --device cuda" 180 train.log '^test accuracy' "${train[@]}" --epochs 2
# Model parallelism: layers on the CPU and the GPU in one process, and a
# 2-stage pipeline whose ranks share the GPU (so over MPI, not NCCL).
step "ddl-train --placement 0-6=cpu:0,7-10=cuda:0" 120 placement.log '^test accuracy' \
  "${train[@]}" --placement 0-6=cpu:0,7-10=cuda:0 --epochs 1
step "ddl-train --parallel pipeline (2 ranks, one GPU)" 180 pipeline.log '^test accuracy' \
  mpiexec -n 2 "${train[@]}" --parallel pipeline --epochs 1
# Data parallelism with the ranks sharing the GPU: NCCL refuses that, so the
# buckets go through pinned host memory on the copy stream, over MPI; 1 MiB
# buckets make several, so copies overlap the backward pass and each other.
step "ddl-train --parallel data (2 ranks, one GPU)" 180 data-parallel.log '^test accuracy' \
  mpiexec -n 2 "${train[@]}" --parallel data --bucket-mb 1 --epochs 1
# Sharded data parallelism on the GPU under ZeRO stage 3 (which releases
# the gathered parameters through CUDA's virtual memory management): the
# same checkpoint as unsharded, byte for byte. The inner shell expands "$@".
# shellcheck disable=SC2016
step "ddl-train --parallel data --shard parameters (2 ranks, one GPU)" 180 sharding.log 'same bytes|differ' \
  bash -c 'for stage in none parameters; do
             rm -rf "/tmp/ddl-shard-$stage"
             mpiexec -n 2 "$@" --parallel data --shard "$stage" --epochs 1 --checkpoint-dir "/tmp/ddl-shard-$stage" || exit
           done
           cmp /tmp/ddl-shard-none/last.ckpt /tmp/ddl-shard-parameters/last.ckpt && echo "the same bytes"' _ "${train[@]}"
# Tensor parallelism with the ranks sharing the GPU: each rank's slices on
# it, the group's allreduces through host memory (NCCL wants a GPU per rank).
step "ddl-train --parallel tensor (2 ranks, one GPU)" 180 tensor.log '^test accuracy' \
  mpiexec -n 2 "${train[@]}" --parallel tensor --epochs 1
# sanitize TOOL: the conformance suite and a short training under one
# compute-sanitizer tool.
sanitize() {
  local tool=$1
  local run=(compute-sanitizer --tool "$tool" --error-exitcode 3)
  # Not the out-of-memory case: its cudaMalloc fails on purpose, which
  # memcheck counts as an error (it ran in the first step, unsanitized).
  step "$tool: conformance" "$sanitizer_limit" "$tool-conformance.log" 'ERROR SUMMARY|RACECHECK SUMMARY' \
    "${run[@]}" "$build/tests/ddl_cuda_conformance" --test-case-exclude='*out of GPU memory*'
  step "$tool: ddl-train (2 batches)" "$sanitizer_limit" "$tool-train.log" 'ERROR SUMMARY|RACECHECK SUMMARY' \
    "${run[@]}" "${train[@]}" --epochs 1 --batch-size 64 --train-limit 128 --test-limit 128
}
have_sanitizer=$(command -v compute-sanitizer)
if [[ -n "$have_sanitizer" ]]; then
  sanitize memcheck
  # Sharding stage 3 on the GPU releases and maps physical memory behind
  # fixed addresses (CUDA's virtual memory management): 2 ranks sharing it.
  step "memcheck: ddl-train --shard parameters (2 ranks)" "$sanitizer_limit" memcheck-sharding.log 'ERROR SUMMARY' \
    mpiexec -n 2 compute-sanitizer --tool memcheck --error-exitcode 3 "${train[@]}" --parallel data \
    --shard parameters --epochs 1 --batch-size 64 --train-limit 256 --test-limit 128
fi
# Not the install tests (they build anew), nor the lessons and the CLI
# tests that draw with gnuplot, which GPU images lack (CPU-only work).
step "ctest (all but install, lessons, plots)" "${DDL_GPU_CTEST_LIMIT:-300}" ctest.log 'tests passed' \
  ctest --test-dir "$build" -j"$(nproc)" -E '^install\.|^lesson_|^ddl_train_cli_(plot|timeline)$' --timeout 240 \
  --output-on-failure
# ddl against PyTorch where the GPU is the bottleneck (PyTorch from the
# image): after the correctness checks, since a short lease needs those more.
step "ddl vs PyTorch, resnet_small step at batch 512" 180 gpu-step.log 'ddl / torch|no PyTorch' \
  bench/compare_gpu_step.sh "$build" "${DDL_GPU_COMPARE_ROUNDS:-2}" 512
# Where the step's time goes on each side, timed algorithms on both: the
# host's time to enqueue a step, and what the GPU ran, by kernel (CUPTI for
# ddl, torch.profiler for PyTorch). The inner shell reads the build as $1.
# shellcheck disable=SC2016
step "what the GPU ran, resnet_small at batch 512" 180 kernels.log '^host:' \
  bash -c 'DDL_CUDA_CONV=benchmark "$1"/bench/ddl_bench_gpu_step --batch 512 --kernels &&
           "${PYTHON:-python3}" bench/torch_gpu_step.py --batch 512 --no-tf32 --profile' _ "$build"
if [[ -n "$have_sanitizer" ]]; then
  for tool in racecheck initcheck synccheck; do sanitize "$tool"; done
else
  echo "compute-sanitizer: not on this machine, sanitizer steps skipped" | tee -a "$out/summary.txt"
fi

echo "== summary =="
cat "$out/summary.txt"
