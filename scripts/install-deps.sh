#!/usr/bin/env bash
# Installs every build, test and run dependency of ddl from Debian's packages.
# Idempotent: packages already present are skipped, so a second run is fast.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libeigen3-dev        # CPU linear algebra (GEMM)
  libdnnl-dev          # CPU convolution primitives (oneDNN)
  ocl-icd-opencl-dev   # only recommended by libdnnl-dev, but its CMake config needs it
  doctest-dev          # unit tests
  mpich libmpich-dev   # processes and collectives transport
  zlib1g-dev           # gzip'd IDX data sets
  libfmt-dev           # formatting
  libcli11-dev         # command-line options
  nlohmann-json3-dev   # JSON traces and logs
  dataset-fashion-mnist
  gnuplot-nox python3  # figures: bench/plot_timeline.py, the lessons' plots
  time                 # /usr/bin/time: the lessons' peak memory per rank
  iproute2 util-linux procps  # scripts/cluster/simulate.sh: ip, tc, nsenter, unshare; pgrep in its test
  # scripts/fuzz.sh: clang; its runtimes (libFuzzer, ASan, UBSan: clang_rt.*
  # in libclang-rt-14-dev, only recommended by clang); clang's OpenMP
  clang libclang-rt-14-dev libomp-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
