// Instantiates the CUDA launcher for every core kernel (DDL_CORE_KERNELS,
// and Map2 / Zip2 over DDL_BINARY_FUNCTORS).
#include <ddl/core/cuda/launch.cuh>
#include <ddl/core/kernels.hpp>

#include <mutex>
#include <vector>

namespace ddl::cuda_backend {

int max_grid_blocks(int device) {
  // Launches may come from several threads (e.g. a communication thread).
  static std::mutex mutex;
  static std::vector<int> cached(static_cast<std::size_t>(device_count()), 0);
  const std::lock_guard lock(mutex);
  int& blocks = cached.at(static_cast<std::size_t>(device));
  if (blocks == 0) {
    int sms = 0;
    DDL_CUDA_CHECK(device, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    blocks = sms * 32;
  }
  return blocks;
}

}  // namespace ddl::cuda_backend

namespace ddl {
#define DDL_INSTANTIATE_CORE(Kernel) DDL_INSTANTIATE_CUDA_LAUNCH(kernels::Kernel)
#define DDL_INSTANTIATE_BINARY(Op) \
  DDL_INSTANTIATE_CUDA_LAUNCH(kernels::Map2<Op>) DDL_INSTANTIATE_CUDA_LAUNCH(kernels::Zip2<Op>)
DDL_CORE_KERNELS(DDL_INSTANTIATE_CORE)
DDL_BINARY_FUNCTORS(DDL_INSTANTIATE_BINARY)
#undef DDL_INSTANTIATE_BINARY
#undef DDL_INSTANTIATE_CORE
}  // namespace ddl
