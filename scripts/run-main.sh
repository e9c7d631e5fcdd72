#!/usr/bin/env bash
# README command (1): installs dependencies, builds, and runs the main job.
# Until the training engine exists, the main job prints the bundled models'
# summaries and runs the autograd demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
"${DDL_BUILD_DIR:-build}"/examples/model_summary
"${DDL_BUILD_DIR:-build}"/examples/autograd_mlp cpu 400
