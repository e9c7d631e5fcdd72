// The kernels behind batch_norm2d (batchnorm2d.cpp dispatches to
// batchnorm2d_cpu.cpp and batchnorm2d_cuda.cpp). Internal: not installed.
#pragma once

#include <cstdint>

#include <ddl/core/cuda/runtime.hpp>

// Internal: the backend kernels behind batch_norm2d, one signature for both
// backends (shaped after cuDNN's). Buffers are contiguous, on the input's
// device; callers have checked every shape. `save_invstd` is
// 1 / sqrt(biased batch variance + eps) (cuDNN's "saved inverse variance").
namespace ddl::layers::batchnorm2d_detail {

struct Geometry {
  std::int64_t batch, channels, height, width;
  std::int64_t per_channel() const { return batch * height * width; }  // M
};

// x, y: [N, C, H, W]; every other buffer [C].
struct ForwardTraining {
  const float* x;
  const float* gamma;
  const float* beta;
  float* y;
  float* running_mean;  // updated in place
  float* running_var;   // updated in place
  float* save_mean;
  float* save_invstd;
};
struct ForwardInference {
  const float* x;
  const float* gamma;
  const float* beta;
  const float* running_mean;
  const float* running_var;
  float* y;
};
// The training-mode backward, through the batch statistics.
struct BackwardTraining {
  const float* x;
  const float* dy;
  const float* gamma;
  const float* save_mean;
  const float* save_invstd;
  float* dx;
  float* dgamma;
  float* dbeta;
};

void forward_training_cpu(const Geometry& g, const ForwardTraining& b, double momentum, double eps);
void forward_inference_cpu(const Geometry& g, const ForwardInference& b, double eps);
void backward_training_cpu(const Geometry& g, const BackwardTraining& b);

void forward_training_cuda(cuda_backend::Stream stream, const Geometry& g, const ForwardTraining& b, double momentum,
                           double eps);
void forward_inference_cuda(cuda_backend::Stream stream, const Geometry& g, const ForwardInference& b, double eps);
void backward_training_cuda(cuda_backend::Stream stream, const Geometry& g, const BackwardTraining& b, double eps);

}  // namespace ddl::layers::batchnorm2d_detail
