// Instantiates the CUDA launcher for every core kernel (DDL_CORE_KERNELS).
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
DDL_CORE_KERNELS(DDL_INSTANTIATE_CUDA_LAUNCH)
}  // namespace ddl
