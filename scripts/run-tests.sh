#!/usr/bin/env bash
# README command (2): installs dependencies, builds, and runs the whole test
# suite with ctest (which prints its summary), then under the sanitizers
# (scripts/sanitize.sh). .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd "${DDL_BUILD_DIR:-build}" && ctest --output-on-failure --timeout 900)
# The suite again under AddressSanitizer + UBSan, and the threaded tests under
# ThreadSanitizer, each in a CPU-only build of its own.
scripts/sanitize.sh
