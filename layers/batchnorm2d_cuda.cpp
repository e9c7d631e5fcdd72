// Batch normalisation on the GPU through cuDNN's CUDNN_BATCHNORM_SPATIAL
// calls on the stream the op passes in. cuDNN's conventions are ours: its
// exponentialAverageFactor is the momentum (running = (1 - f) * running +
// f * batch), its running variance uses the unbiased batch variance, and its
// saved "inverse variance" is 1 / sqrt(var + eps), what backward reads.
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/layers/batchnorm2d_kernels.hpp>
#include <ddl/layers/cuda/cudnn.hpp>

namespace ddl::layers::batchnorm2d_detail {
namespace {

using cuda_backend::TensorDescriptor;

// The descriptors of one call: x (and y, dx, dy, same shape) [N, C, H, W],
// and the per-channel tensors [1, C, 1, 1].
struct Descriptors {
  TensorDescriptor data, per_channel;
  Descriptors(int device, const Geometry& g) : data(device), per_channel(device) {
    cuda_backend::set_nchw(data, g.batch, g.channels, g.height, g.width);
    cuda_backend::set_nchw(per_channel, 1, g.channels, 1, 1);
  }
};

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

}  // namespace

void forward_training_cuda(cuda_backend::Stream stream, const Geometry& g, const ForwardTraining& b, double momentum,
                           double eps) {
  const int device = stream.device;
  const cuda_backend::DeviceGuard guard(device);
  const Descriptors d(device, g);
  const float one = 1.0f, zero = 0.0f;
  DDL_CUDNN_CHECK(device, cudnnBatchNormalizationForwardTraining(
                              cuda_backend::cudnn_handle(stream), kMode, &one, &zero, d.data.get(), b.x, d.data.get(),
                              b.y, d.per_channel.get(), b.gamma, b.beta, momentum, b.running_mean, b.running_var, eps,
                              b.save_mean, b.save_invstd));
}

void forward_inference_cuda(cuda_backend::Stream stream, const Geometry& g, const ForwardInference& b, double eps) {
  const int device = stream.device;
  const cuda_backend::DeviceGuard guard(device);
  const Descriptors d(device, g);
  const float one = 1.0f, zero = 0.0f;
  DDL_CUDNN_CHECK(device, cudnnBatchNormalizationForwardInference(
                              cuda_backend::cudnn_handle(stream), kMode, &one, &zero, d.data.get(), b.x, d.data.get(),
                              b.y, d.per_channel.get(), b.gamma, b.beta, b.running_mean, b.running_var, eps));
}

void backward_training_cuda(cuda_backend::Stream stream, const Geometry& g, const BackwardTraining& b, double eps) {
  const int device = stream.device;
  const cuda_backend::DeviceGuard guard(device);
  const Descriptors d(device, g);
  const float one = 1.0f, zero = 0.0f;
  // alpha = 1, beta = 0 for both the data and the parameter gradients: the
  // results overwrite dx, dgamma and dbeta (autograd does the accumulating).
  DDL_CUDNN_CHECK(device, cudnnBatchNormalizationBackward(cuda_backend::cudnn_handle(stream), kMode, &one, &zero, &one,
                                                          &zero, d.data.get(), b.x, d.data.get(), b.dy, d.data.get(),
                                                          b.dx, d.per_channel.get(), b.gamma, b.dgamma, b.dbeta, eps,
                                                          b.save_mean, b.save_invstd));
}

}  // namespace ddl::layers::batchnorm2d_detail
