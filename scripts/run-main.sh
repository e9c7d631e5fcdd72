#!/usr/bin/env bash
# README command (1): installs dependencies, builds, and runs the main job:
# the bundled Keras MNIST CNN trained on Fashion-MNIST (12 epochs, Adadelta,
# global batch 128) with data parallelism over 2 MPI ranks of one thread
# each, reporting the test accuracy at the end. Extra arguments go to
# ddl-train (e.g. --epochs 2, --allreduce rhd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mpiexec -n 2 "${DDL_BUILD_DIR:-build}"/apps/ddl-train --parallel data --allreduce ring --threads 1 \
  --model mnist_cnn --epochs 12 --batch-size 128 --optimizer adadelta "$@"
