// The CUDA side of "one kernel body, two backends": a grid-stride loop that
// calls the same index kernel the CPU runs, instantiated for every kernel
// in DDL_CORE_KERNELS.
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/cuda/stream.hpp>
#include <ddl/core/kernels.hpp>

#include <algorithm>
#include <vector>

namespace ddl::cuda_backend {
namespace {

template <class Kernel>
__global__ void grid_stride_loop(std::int64_t n, Kernel kernel) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    kernel(i);
  }
}

// Enough blocks to fill every SM several times over; more only adds
// scheduling overhead since each thread loops.
int max_blocks(int device) {
  static std::vector<int> cached(static_cast<std::size_t>(device_count()), 0);
  int& blocks = cached.at(static_cast<std::size_t>(device));
  if (blocks == 0) {
    int sms = 0;
    DDL_CUDA_CHECK(device, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    blocks = sms * 32;
  }
  return blocks;
}

}  // namespace

template <class Kernel>
void launch(int device, std::int64_t n, const Kernel& kernel) {
  constexpr int kThreads = 256;
  const DeviceGuard guard(device);
  const std::int64_t needed = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::min<std::int64_t>(needed, max_blocks(device)));
  grid_stride_loop<<<blocks, kThreads, 0, stream(device)>>>(n, kernel);
  DDL_CUDA_CHECK(device, cudaGetLastError());
}

#define DDL_INSTANTIATE_LAUNCH(Kernel) \
  template void launch<kernels::Kernel>(int, std::int64_t, const kernels::Kernel&);
DDL_CORE_KERNELS(DDL_INSTANTIATE_LAUNCH)
#undef DDL_INSTANTIATE_LAUNCH

}  // namespace ddl::cuda_backend
