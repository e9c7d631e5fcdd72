#!/usr/bin/env bash
# Configures and builds ddl in ./build (incrementally on later runs).
#   DDL_BUILD_DIR        build folder (default: build)
#   DDL_CUDA_ARCHS       CUDA architectures (default: 80;90; CI builds 90 only)
#   DDL_BUILD_TARGETS    what to build, e.g. ddl-train (default: everything)
#   extra arguments go to cmake's configure step, e.g. -DDDL_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${DDL_BUILD_DIR:-build}
archs=${DDL_CUDA_ARCHS:-}
if [[ -z "$archs" && "${CI:-}" == "true" ]]; then archs=90; fi  # one architecture halves CI's nvcc time
args=()
if [[ -n "$archs" ]]; then args+=("-DCMAKE_CUDA_ARCHITECTURES=$archs"); fi

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${args[@]}" "$@"
targets=()
for target in ${DDL_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}"
