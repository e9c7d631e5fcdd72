// Pooling on the GPU through cuDNN (cudnnPoolingForward / Backward) on the
// stream the op passes in. Descriptors are made per call: they are host-side
// structs, cheap next to the kernel, and per-call keeps this file stateless.
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/layers/cuda/cudnn.hpp>
#include <ddl/layers/pool2d.hpp>

#include <climits>

namespace ddl::layers::pool2d_detail {
namespace {

using cuda_backend::PoolingDescriptor;
using cuda_backend::TensorDescriptor;

int checked_int(std::int64_t value, int device) {
  if (value > INT_MAX) {
    cuda_backend::fail_call("cudnnSetPooling2dDescriptor", device, "size too large",
                            "a pooling parameter exceeds INT_MAX", __FILE__, __LINE__);
  }
  return static_cast<int>(value);
}

// Everything a cuDNN pooling call describes: the window and both tensors.
struct PoolingCall {
  PoolingDescriptor pooling;
  TensorDescriptor x, y;

  PoolingCall(int device, Mode mode, const Geometry& g) : pooling(device), x(device), y(device) {
    const int k = checked_int(g.kernel, device), s = checked_int(g.stride, device), p = checked_int(g.padding, device);
    // MAX_DETERMINISTIC has MAX's forward and a backward that gives the same
    // gradients run to run where windows overlap. NaNs propagate, as on the
    // CPU. Average divides by the full window (count_include_pad).
    const cudnnPoolingMode_t cudnn_mode =
        mode == Mode::Max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    DDL_CUDNN_CHECK(device,
                    cudnnSetPooling2dDescriptor(pooling.get(), cudnn_mode, CUDNN_PROPAGATE_NAN, k, k, p, p, s, s));
    cuda_backend::set_nchw(x, g.batch, g.channels, g.height, g.width);
    cuda_backend::set_nchw(y, g.batch, g.channels, g.out_height, g.out_width);
  }
};

}  // namespace

void forward_cuda(cuda_backend::Stream stream, Mode mode, const Geometry& g, const float* x, float* y) {
  const int device = stream.device;
  const cuda_backend::DeviceGuard guard(device);
  const PoolingCall call(device, mode, g);
  // Our output size (pool2d.cpp) must be cuDNN's, or y is mis-described.
  int n = 0, c = 0, h = 0, w = 0;
  DDL_CUDNN_CHECK(device, cudnnGetPooling2dForwardOutputDim(call.pooling.get(), call.x.get(), &n, &c, &h, &w));
  if (h != g.out_height || w != g.out_width) {
    cuda_backend::fail_call("cudnnGetPooling2dForwardOutputDim", device, "output size mismatch",
                            "cuDNN's pooling output extent differs from ddl's", __FILE__, __LINE__);
  }
  const float one = 1.0f, zero = 0.0f;
  DDL_CUDNN_CHECK(device, cudnnPoolingForward(cuda_backend::cudnn_handle(stream), call.pooling.get(), &one,
                                              call.x.get(), x, &zero, call.y.get(), y));
}

void backward_cuda(cuda_backend::Stream stream, Mode mode, const Geometry& g, const float* x, const float* y,
                   const float* dy, float* dx) {
  const int device = stream.device;
  const cuda_backend::DeviceGuard guard(device);
  const PoolingCall call(device, mode, g);
  const float one = 1.0f, zero = 0.0f;
  DDL_CUDNN_CHECK(device,
                  cudnnPoolingBackward(cuda_backend::cudnn_handle(stream), call.pooling.get(), &one, call.y.get(), y,
                                       call.y.get(), dy, call.x.get(), x, &zero, call.x.get(), dx));
}

}  // namespace ddl::layers::pool2d_detail
