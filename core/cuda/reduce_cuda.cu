// Full reductions on the GPU with CUB's device-wide sum (two passes: query
// the scratch size, then reduce); the scratch comes from the caching
// allocator, so repeated sums do not touch cudaMalloc.
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <cub/device/device_reduce.cuh>

namespace ddl::cuda_backend {

void sum_all(Stream stream, const float* x, std::int64_t n, float* out) {
  const int device = stream.device;
  const DeviceGuard guard(device);
  std::size_t scratch_bytes = 0;
  DDL_CUDA_CHECK(device, cub::DeviceReduce::Sum(nullptr, scratch_bytes, x, out, n, stream.handle));
  void* scratch = allocate(device, std::max<std::size_t>(scratch_bytes, 1));
  const cudaError_t status = cub::DeviceReduce::Sum(scratch, scratch_bytes, x, out, n, stream.handle);
  deallocate(device, scratch);  // stream-ordered: the reduction finishes before reuse
  DDL_CUDA_CHECK(device, status);
}

}  // namespace ddl::cuda_backend
