// The kernels behind max_pool2d and avg_pool2d (pool2d.cpp dispatches to
// pool2d_cpu.cpp and pool2d_cuda.cpp). Internal: not installed.
#pragma once

#include <cstdint>
#include <span>

#include <ddl/core/cuda/runtime.hpp>

// Internal: the backend kernels behind max_pool2d / avg_pool2d, with the same
// signature on both backends. Buffers are contiguous NCHW (the blocked
// kernels': nChwBc) on the tensor's device; callers have checked every
// shape.
namespace ddl::layers::pool2d_detail {

enum class Mode { Max, Average };

struct Geometry {
  std::int64_t batch, channels, height, width;
  std::int64_t out_height, out_width;
  std::int64_t kernel, stride, padding;
  bool ceil_mode;          // out_height and out_width were rounded up
  bool count_include_pad;  // average pooling's divisor, as Pool2dOptions
  std::int64_t planes() const { return batch * channels; }
};

// CPU (pool2d_cpu.cpp). `argmax` receives, per output, the flat index
// (row * width + column) of the winner inside its input plane; an empty
// one, nothing (no gradient wanted). The backward kernels overwrite dx.
void max_forward_cpu(const Geometry& g, std::span<const float> x, std::span<float> y, std::span<std::int64_t> argmax);
void max_backward_cpu(const Geometry& g, std::span<const float> dy, std::span<const std::int64_t> argmax,
                      std::span<float> dx);
// Max pooling of x stored channel-blocked, nChwBc with B = `block` (8 or
// 16; core/cpu/onednn.hpp): the same windows and the same winner (the
// first maximum, or the first NaN), B channels at once. y and the winners
// come out in that order too (the winners in 32 bits); dy is read in it
// (dy_blocked) or in NCHW, and dx is written in it.
void max_forward_blocked_cpu(const Geometry& g, int block, std::span<const float> x, std::span<float> y,
                             std::span<std::int32_t> argmax);
void max_backward_blocked_cpu(const Geometry& g, int block, std::span<const float> dy, bool dy_blocked,
                              std::span<const std::int32_t> argmax, std::span<float> dx);
void avg_forward_cpu(const Geometry& g, std::span<const float> x, std::span<float> y);
void avg_backward_cpu(const Geometry& g, std::span<const float> dy, std::span<float> dx);

// CUDA (pool2d_cuda.cpp, cuDNN). Backward needs the forward's x and y for
// both modes: cuDNN's interface takes them (max pooling finds the winner by
// comparing x with y).
void forward_cuda(cuda_backend::Stream stream, Mode mode, const Geometry& g, const float* x, float* y);
void backward_cuda(cuda_backend::Stream stream, Mode mode, const Geometry& g, const float* x, const float* y,
                   const float* dy, float* dx);

}  // namespace ddl::layers::pool2d_detail
