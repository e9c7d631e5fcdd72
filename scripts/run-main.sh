#!/usr/bin/env bash
# README command (1): installs dependencies, builds what the main job needs
# (ddl-train and the library; the tests are README command 2's), and runs
# the main job (scripts/main-job.sh): the bundled Keras MNIST CNN trained on
# Fashion-MNIST with data parallelism over 2 MPI ranks, reporting the test
# accuracy at the end. Extra arguments go to ddl-train (e.g. --epochs 2,
# --allreduce rhd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
DDL_BUILD_TARGETS=ddl-train scripts/build.sh
scripts/main-job.sh "$@"
