#!/usr/bin/env bash
# Installs the peers the benchmarks in bench/ compare ddl against (PyTorch
# and Keras on the CPU). Nothing in ddl's build, tests or CLI depends on them;
# only bench/ uses PyPI.
#
#   bench/install-peers.sh            # as root, or a user with sudo
#
# What it installs:
#   1. From Debian: python3-torch 1.13 (the extra column only) and
#      libopenblas0-pthread, which it must run with:
#        LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread /usr/bin/python3 ...
#   2. python3-venv (Debian), then a virtual environment bench/.venv-peers
#      (git-ignored) holding the main peers from PyPI, at pinned versions:
#        torch 2.15.0 (the PyPI wheel: it pulls NVIDIA's CUDA packages, some
#          GB, but runs on the CPU here; MKL + oneDNN),
#        tensorflow-cpu 2.21.0 and keras 3.15.1 (oneDNN).
#      Run them as bench/.venv-peers/bin/python3 bench/<script>.py, with
#      explicit thread counts and, for torch, a larger glibc malloc
#      threshold (~15% faster for it; the scripts that use them set both).
# Re-running it is cheap: pip skips what is already at the pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends python3-torch libopenblas0-pthread python3-venv

venv=bench/.venv-peers
if [[ ! -x $venv/bin/python3 ]]; then
  /usr/bin/python3 -m venv "$venv"
fi
"$venv"/bin/python3 -m pip install --quiet --disable-pip-version-check \
  torch==2.15.0 tensorflow-cpu==2.21.0 keras==3.15.1
"$venv"/bin/python3 -c 'import torch; print("torch", torch.__version__, "in", torch.__file__)'
