#!/usr/bin/env bash
# Packs a CUDA build (default build-cuda) into .gpu/ for a GPU machine that
# has a CUDA 13 driver, cuDNN 9 and NCCL 2 (e.g. a PyTorch image) but not
# Debian's packages: the build without its objects, the MPICH, UCX, fmt and
# oneDNN libraries it links, MPICH's launcher, and Fashion-MNIST's test set (also as
# the training set, to keep the bundle near 40 MiB). The build must be
# portable (-DDDL_NATIVE=OFF). On that machine, from
# the repository root: scripts/gpu/check.sh (which sources .gpu/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
# The GPU machine's CPU is not this one: -march=native code can die there
# with an illegal instruction.
if ! grep -qiE '^DDL_NATIVE:BOOL=(OFF|0|FALSE|NO)$' "$build/CMakeCache.txt"; then
  echo "bundle.sh: $build is built for this CPU (-march=native); configure it with -DDDL_NATIVE=OFF, e.g." >&2
  echo "  DDL_BUILD_DIR=$build DDL_CUDA_ARCHS=90 scripts/build.sh -DDDL_NATIVE=OFF -DDDL_CUDA=ON -DDDL_NCCL=ON" >&2
  exit 2
fi
rm -rf .gpu && mkdir -p .gpu/lib .gpu/bin .gpu/fm .gpu/build
tar -C "$build" --exclude=CMakeFiles --exclude='*.o' --exclude='*.a' -cf - . | tar -C .gpu/build -xf -
for lib in libfmt.so.9 libmpich.so.12 libhwloc.so.15 libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 \
           libucs_signal.so.0 libnuma.so.1 libslurm.so.38 libudev.so.1 libgomp.so.1 libdnnl.so.2 libOpenCL.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .gpu/lib/
done
packed=(.gpu/lib/libmpich.so.12 .gpu/lib/libdnnl.so.2)
# The GPU step bench's --kernels links the toolkit's CUPTI, which GPU images
# seldom carry.
cupti=$(sed -n 's/^CUDA_cupti_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt")
if [[ -n $cupti && -e $cupti ]]; then
  packed+=(".gpu/lib/$(objdump -p "$cupti" | awk '$1 == "SONAME" { print $2 }')")
  cp -L "$cupti" "${packed[-1]}"
fi
xz -T2 -6 "${packed[@]}"
cp /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy .gpu/bin/
data=/usr/share/datasets/fashion-mnist
cp "$data"/t10k-* .gpu/fm/
cp "$data"/t10k-images-idx3-ubyte.gz .gpu/fm/train-images-idx3-ubyte.gz
cp "$data"/t10k-labels-idx1-ubyte.gz .gpu/fm/train-labels-idx1-ubyte.gz
# The binaries and ctest's files name the build by its absolute path.
realpath "$build" > .gpu/build-path
du -sh .gpu
