# Sourced on the GPU machine from the repository root (scripts/gpu/check.sh
# does): puts the bundle of scripts/gpu/bundle.sh where the build expects to
# be, installs MPICH's launcher as mpiexec, and finds the machine's CUDA
# libraries for LD_LIBRARY_PATH.
G=$PWD/.gpu
for packed in "$G"/lib/*.xz; do [ -e "$packed" ] && { [ -f "${packed%.xz}" ] || xz -d -k "$packed"; }; done
build_path=$(cat "$G/build-path")
mkdir -p "$(dirname "$build_path")"
[ -e "$build_path" ] || ln -s "$G/build" "$build_path"
mkdir -p /usr/share/datasets
[ -e /usr/share/datasets/fashion-mnist ] || ln -s "$G/fm" /usr/share/datasets/fashion-mnist
cp "$G/bin/mpiexec.hydra" "$G/bin/hydra_pmi_proxy" /usr/bin/
ln -sfn /usr/bin/mpiexec.hydra /usr/bin/mpiexec  # ctest's MPI tests call /usr/bin/mpiexec
cuda_dirs=""
for lib in libcudnn.so.9 libnccl.so.2 libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
  found=$(find /usr/local /opt /usr/lib -name "$lib" -print -quit 2>/dev/null)
  [ -n "$found" ] && cuda_dirs="$cuda_dirs:$(dirname "$found")"
done
export LD_LIBRARY_PATH=$G/lib$cuda_dirs
ldd "$build_path/libddl.so.0" | grep -E 'not found|cudnn|nccl|cublas|mpich'
