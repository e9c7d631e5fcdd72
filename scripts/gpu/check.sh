#!/usr/bin/env bash
# On a GPU machine, after scripts/gpu/bundle.sh here: the CUDA conformance
# suite (also under compute-sanitizer when present), NCCL with one rank, the
# whole ctest suite but the install tests, and ddl-train on the GPU. Logs go
# to ${OUT:-/tmp/ddl-gpu}; the last lines summarise.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/ddl-gpu}
mkdir -p "$out"
source scripts/gpu/setup.sh > "$out/setup.log" 2>&1
build=$(cat .gpu/build-path)
nvidia-smi -L
"$build/tests/ddl_cuda_conformance" > "$out/conformance.log" 2>&1
echo "conformance: exit $? ($(grep 'assertions:' "$out/conformance.log"))"
if command -v compute-sanitizer > /dev/null; then
  compute-sanitizer --tool memcheck "$build/tests/ddl_cuda_conformance" > "$out/memcheck.log" 2>&1
  echo "memcheck: exit $? ($(grep 'ERROR SUMMARY' "$out/memcheck.log"))"
fi
DDL_STALL_TIMEOUT=60 mpiexec -n 1 "$build/tests/ddl_mpi_nccl_tests" > "$out/nccl.log" 2>&1
echo "NCCL, 1 rank: exit $? ($(grep 'test cases:' "$out/nccl.log"))"
(cd "$build" && ctest -j8 -E '^install\.' --timeout 300 --output-on-failure > "$out/ctest.log" 2>&1)
echo "ctest: exit $? ($(grep 'tests passed' "$out/ctest.log"))"
"$build/apps/ddl-train" --device cuda --epochs 2 --threads 4 > "$out/train.log" 2>&1
echo "ddl-train --device cuda: exit $? ($(tail -n 1 "$out/train.log"))"
# Model parallelism: layers on the CPU and the GPU in one process, and a
# 2-stage pipeline whose ranks share the GPU (so over MPI, not NCCL).
"$build/apps/ddl-train" --device cuda --placement 0-6=cpu:0,7-10=cuda:0 --epochs 1 --threads 4 > "$out/placement.log" 2>&1
echo "ddl-train --placement 0-6=cpu:0,7-10=cuda:0: exit $? ($(grep '^test accuracy' "$out/placement.log"))"
DDL_STALL_TIMEOUT=60 mpiexec -n 2 "$build/apps/ddl-train" --parallel pipeline --device cuda --epochs 1 --threads 4 \
  > "$out/pipeline.log" 2>&1
echo "ddl-train --parallel pipeline --device cuda (2 ranks, one GPU): exit $? ($(grep '^test accuracy' "$out/pipeline.log"))"
