#!/usr/bin/env bash
# README command (2): installs dependencies, builds, and runs the whole test
# suite with ctest (which prints its summary), then under the sanitizers
# (scripts/sanitize.sh), then the fuzzers for a short while
# (DDL_FUZZ_SECONDS=0: built, not run). .ci/run calls exactly this.
#   scripts/run-tests.sh [--all]
# --all runs the long tests too (DDL_LONG_TESTS=1): the main job's
# accuracy (about 15 minutes on 2 cores), and the end-to-end trainings
# under the sanitizers; without it ctest reports the main job as skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize_args=()
case ${1:-} in
  --all) export DDL_LONG_TESTS=1; sanitize_args=(--all) ;;
  "") ;;
  *) echo "run-tests.sh: unknown argument '$1' (expected --all)" >&2; exit 2 ;;
esac
scripts/install-deps.sh
# The data install-deps.sh installs: a test that finds it missing fails
# here, instead of being skipped as on a machine without it.
export DDL_REQUIRE_TEST_DATA=1
scripts/build.sh
# Tests run side by side, one per core; those that start several processes
# (MPI ranks) claim a core each (ctest's PROCESSORS, tests/CMakeLists.txt).
(cd "${DDL_BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900 -j"$(nproc)")
# The suite again under AddressSanitizer + UBSan, and the threaded tests under
# ThreadSanitizer, each in a CPU-only build of its own.
scripts/sanitize.sh "${sanitize_args[@]}"
# Then libFuzzer on every parser of outside bytes (scripts/fuzz.sh), the
# targets the ASan build compiled beside the suite: 20 s a target, 8
# targets, one per core at a time (about 1.5 min on 2 cores), enough to
# replay the seeds and catch a regression without doubling CI.
DDL_FUZZ_BUILD_DIR=build-asan DDL_FUZZ_SECONDS=${DDL_FUZZ_SECONDS:-20} scripts/fuzz.sh
