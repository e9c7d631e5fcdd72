// The CUDA side of "one kernel body, two backends": a grid-stride loop that
// calls the same index kernel the CPU runs. Each module's cuda/kernels_cuda.cu
// includes this and instantiates launch<K> for every kernel of its list
// (kernel_list.hpp).
#pragma once

#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <algorithm>
#include <cstdint>

namespace ddl::cuda_backend {

template <class Kernel>
__global__ void grid_stride_loop(std::int64_t n, Kernel kernel) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    kernel(i);
  }
}

// Enough blocks to fill every SM several times over; more only adds
// scheduling overhead since each thread loops. Defined in runtime_cuda.cu.
int max_grid_blocks(int device);

template <class Kernel>
void launch(Stream stream, std::int64_t n, const Kernel& kernel) {
  constexpr int kThreads = 256;
  const DeviceGuard guard(stream.device);
  const std::int64_t needed = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::min<std::int64_t>(needed, max_grid_blocks(stream.device)));
  grid_stride_loop<<<blocks, kThreads, 0, stream.handle>>>(n, kernel);
  DDL_CUDA_CHECK(stream.device, cudaGetLastError());
}

}  // namespace ddl::cuda_backend

// Instantiates the launcher for one list entry (a name relative to
// ddl::kernels); use inside namespace ddl: DDL_CORE_KERNELS(DDL_INSTANTIATE_CUDA_LAUNCH).
#define DDL_INSTANTIATE_CUDA_LAUNCH(Kernel) \
  template void cuda_backend::launch<kernels::Kernel>(cuda_backend::Stream, std::int64_t, const kernels::Kernel&);
