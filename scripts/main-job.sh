#!/usr/bin/env bash
# The main job, on a build that exists: the bundled Keras MNIST CNN trained
# on Fashion-MNIST (12 epochs, Adadelta, global batch 128) with data
# parallelism over 2 MPI ranks of one thread each, reporting the test
# accuracy at the end (about 92%). scripts/run-main.sh (README command 1)
# installs and builds first; the test main_job_accuracy runs it too.
#   scripts/main-job.sh [ddl-train arguments]   e.g. --epochs 2
#   DDL_BUILD_DIR   the build folder (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
exec mpiexec -n 2 "${DDL_BUILD_DIR:-build}"/apps/ddl-train --parallel data --allreduce ring --threads 1 \
  --model mnist_cnn --epochs 12 --batch-size 128 --optimizer adadelta "$@"
