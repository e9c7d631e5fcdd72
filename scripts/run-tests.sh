#!/usr/bin/env bash
# README command (2): installs dependencies, builds, and runs the whole test
# suite with ctest (which prints its summary), then under the sanitizers
# (scripts/sanitize.sh), then the fuzzers for a short while
# (DDL_FUZZ_SECONDS=0: built, not run). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# Tests run side by side, one per core; those that start several processes
# (MPI ranks) claim a core each (ctest's PROCESSORS, tests/CMakeLists.txt).
(cd "${DDL_BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900 -j"$(nproc)")
# The suite again under AddressSanitizer + UBSan, and the threaded tests under
# ThreadSanitizer, each in a CPU-only build of its own.
scripts/sanitize.sh
# Then libFuzzer on every parser of outside bytes (scripts/fuzz.sh), the
# targets the ASan build compiled beside the suite: 20 s a target, 8
# targets, one per core at a time (about 1.5 min on 2 cores), enough to
# replay the seeds and catch a regression without doubling CI.
DDL_FUZZ_BUILD_DIR=build-asan DDL_FUZZ_SECONDS=${DDL_FUZZ_SECONDS:-20} scripts/fuzz.sh
