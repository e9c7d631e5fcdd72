#!/usr/bin/env bash
# README command (1): installs dependencies, builds, and runs the main job:
# ddl-train trains the bundled Keras MNIST CNN on Fashion-MNIST (12 epochs,
# Adadelta, batch 128) and reports its test accuracy. Extra arguments go to
# ddl-train (e.g. --epochs 2). Data parallelism over 2 MPI ranks comes with
# the parallel module.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
"${DDL_BUILD_DIR:-build}"/apps/ddl-train --model mnist_cnn --epochs 12 --batch-size 128 --optimizer adadelta "$@"
