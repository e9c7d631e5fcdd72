#!/usr/bin/env bash
# Installs the peers the benchmarks compare against, from Debian's packages:
# PyTorch (CPU) and the OpenBLAS it must be run with (see DESIGN.md).
set -euo pipefail
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends python3-torch libopenblas0-pthread
