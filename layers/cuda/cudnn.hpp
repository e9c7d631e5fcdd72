// Internal to the layers' CUDA kernels: one cuDNN handle per device, RAII
// wrappers for the descriptors, and DDL_CUDNN_CHECK, which throws ddl::Error
// naming the call and the device.
#pragma once

#include <cudnn.h>

#include <cstdint>

#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>

#define DDL_CUDNN_CHECK(device, call)                                                                 \
  do {                                                                                                \
    const cudnnStatus_t ddl_status_ = (call);                                                         \
    if (ddl_status_ != CUDNN_STATUS_SUCCESS) {                                                        \
      ::ddl::cuda_backend::fail_call(#call, (device), "cuDNN error", cudnnGetErrorString(ddl_status_), \
                                     __FILE__, __LINE__);                                             \
    }                                                                                                 \
  } while (false)

namespace ddl::cuda_backend {

// The cuDNN handle of stream.device, queuing its calls on `stream`.
cudnnHandle_t cudnn_handle(Stream stream);

// A cuDNN descriptor that destroys itself: Handle<cudnnTensorDescriptor_t,
// cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>.
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  explicit Descriptor(int device) : device_(device) { DDL_CUDNN_CHECK(device_, Create(&value_)); }
  ~Descriptor() { Destroy(value_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return value_; }
  int device() const { return device_; }

 private:
  int device_;
  T value_{};
};

using TensorDescriptor = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor = Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;

// A float32 NCHW tensor descriptor of the given extents.
void set_nchw(const TensorDescriptor& descriptor, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w);

}  // namespace ddl::cuda_backend
