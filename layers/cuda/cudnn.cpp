#include <ddl/core/cuda/per_device.hpp>
#include <ddl/layers/cuda/cudnn.hpp>

#include <climits>

namespace ddl::cuda_backend {

cudnnHandle_t cudnn_handle(Stream stream) {
  static PerDevice<cudnnHandle_t> handles([](int device) {
    cudnnHandle_t created = nullptr;
    DDL_CUDNN_CHECK(device, cudnnCreate(&created));
    return created;
  });
  const cudnnHandle_t handle = handles.get(stream.device);
  DDL_CUDNN_CHECK(stream.device, cudnnSetStream(handle, stream.handle));
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
