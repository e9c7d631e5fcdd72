// The operations every backend provides, and the one place that picks the
// backend from a tensor's device. Ops are written once against this layer:
// elementwise work goes through launch() with a kernel from kernels.hpp;
// GEMM, full reductions and copies go to a library per backend (Eigen on
// CPU; cuBLAS, CUB and the CUDA runtime on GPU).
#pragma once

#include <cstddef>
#include <cstdint>

#include <ddl/core/cpu/parallel_for.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/dispatch.hpp>
#include <ddl/core/gemm_args.hpp>
#include <ddl/core/kernel_list.hpp>

namespace ddl::backend {

// Runs kernel(i) for i in [0, n) on `device`. The kernel must be in its
// module's list (kernel_list.hpp), which is what the CUDA backend compiles.
template <class Kernel>
void launch(const Device& device, std::int64_t n, const Kernel& kernel) {
  static_assert(kernels::kListed<Kernel>,
                "backend::launch: this kernel is in no kernel list (DDL_CORE_KERNELS, DDL_LAYER_KERNELS, "
                "DDL_OPTIM_KERNELS), so a CUDA build would not compile it; add it to its module's list");
  if (n <= 0) return;
  dispatch(
      kernels::kName<Kernel>, device, [&] { cpu_backend::parallel_for(n, kernel); },
      [&](auto stream) { cuda_backend::launch(stream, n, kernel); });
}

void gemm(const Device& device, const GemmArgs& args);

// out[0] = sum of x[0..n), out on the same device; deterministic on CPU.
void sum_all(const Device& device, const float* x, std::int64_t n, float* out);

void copy_bytes(const Device& dst_device, void* dst, const Device& src_device, const void* src, std::size_t bytes);
void fill_zero(const Device& device, void* data, std::size_t bytes);

}  // namespace ddl::backend

namespace ddl::cpu_backend {
void gemm(const backend::GemmArgs& args);
// The bytes of the staging buffers gemm(args) fills on the calling thread
// (its operands copied with longer rows), for memory plans.
std::size_t gemm_staging_bytes(const backend::GemmArgs& args);
void sum_all(const float* x, std::int64_t n, float* out);
}  // namespace ddl::cpu_backend
