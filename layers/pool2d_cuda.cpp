// Pooling on the GPU through cuDNN (cudnnPoolingForward / Backward) on the
// stream the op passes in. Descriptors are made per call: they are host-side
// structs, cheap next to the kernel, and per-call keeps this file stateless.
#include <ddl/core/check.hpp>
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/layers/cuda/cudnn.hpp>
#include <ddl/layers/pool2d_kernels.hpp>

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

// Whether a window runs past the bottom or right padding, which only
// ceil_mode makes happen.
bool window_passes_padding(const Geometry& g) {
  const auto last_end = [&g](std::int64_t out) { return (out - 1) * g.stride - g.padding + g.kernel; };
  return last_end(g.out_height) > g.height + g.padding || last_end(g.out_width) > g.width + g.padding;
}

cudnnPoolingMode_t cudnn_mode_of(int device, Mode mode, const Geometry& g) {
  // MAX_DETERMINISTIC has MAX's forward and a backward that gives the same
  // gradients run to run where windows overlap.
  if (mode == Mode::Max) return CUDNN_POOLING_MAX_DETERMINISTIC;
  if (!g.count_include_pad) return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  // PyTorch (and the CPU) count the padding but not the positions past it;
  // cuDNN does not document what it counts there, so that case is refused.
  DDL_CHECK(!window_passes_padding(g),
            "avg_pool2d on cuda:{}: ceil_mode with count_include_pad is not supported when a window runs past the "
            "padding (input {}x{}, kernel {}, stride {}, padding {}, output {}x{}); use count_include_pad = false",
            device, g.height, g.width, g.kernel, g.stride, g.padding, g.out_height, g.out_width);
  return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
}

// Everything a cuDNN pooling call describes: the window and both tensors.
// y is described with ddl's extent, which in ceil_mode may be one more than
// cuDNN's own (cudnnGetPooling2dForwardOutputDim rounds down): cuDNN then
// computes the last, partial windows too, treating positions past the input
// as padding, as cudnn.torch's ceil mode relied on.
struct PoolingCall {
  PoolingDescriptor pooling;
  TensorDescriptor x, y;

  PoolingCall(int device, Mode mode, const Geometry& g) : pooling(device), x(device), y(device) {
    const int k = checked_int(g.kernel, device), s = checked_int(g.stride, device), p = checked_int(g.padding, device);
    // NaNs propagate, as on the CPU.
    const cudnnPoolingMode_t cudnn_mode = cudnn_mode_of(device, mode, g);
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
  // Our output size (pool2d.cpp) must be cuDNN's, or one more in ceil_mode,
  // or y is mis-described.
  int n = 0, c = 0, h = 0, w = 0;
  DDL_CUDNN_CHECK(device, cudnnGetPooling2dForwardOutputDim(call.pooling.get(), call.x.get(), &n, &c, &h, &w));
  const std::int64_t slack = g.ceil_mode ? 1 : 0;
  if (g.out_height < h || g.out_height > h + slack || g.out_width < w || g.out_width > w + slack) {
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
