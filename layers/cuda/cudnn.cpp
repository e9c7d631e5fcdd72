#include <ddl/core/cuda/stream.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/layers/cuda/cudnn.hpp>

#include <climits>
#include <mutex>
#include <vector>

namespace ddl::cuda_backend {

cudnnHandle_t cudnn_handle(int device) {
  static std::mutex mutex;
  static std::vector<cudnnHandle_t> handles(static_cast<std::size_t>(device_count()), nullptr);
  const std::lock_guard lock(mutex);
  cudnnHandle_t& handle = handles.at(static_cast<std::size_t>(device));
  if (handle == nullptr) {
    const DeviceGuard guard(device);
    DDL_CUDNN_CHECK(device, cudnnCreate(&handle));
    DDL_CUDNN_CHECK(device, cudnnSetStream(handle, stream(device)));
  }
  return handle;
}

void set_nchw(const TensorDescriptor& descriptor, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  for (const std::int64_t extent : {n, c, h, w}) {
    if (extent > INT_MAX) {
      fail_call("cudnnSetTensor4dDescriptor", descriptor.device(), "size too large", "extent exceeds INT_MAX",
                __FILE__, __LINE__);
    }
  }
  DDL_CUDNN_CHECK(descriptor.device(),
                  cudnnSetTensor4dDescriptor(descriptor.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                             static_cast<int>(n), static_cast<int>(c), static_cast<int>(h),
                                             static_cast<int>(w)));
}

}  // namespace ddl::cuda_backend
