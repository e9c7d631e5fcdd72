// Batch normalisation over NCHW inputs, per channel (Ioffe & Szegedy 2015):
// y = (x - mean) / sqrt(var + eps) * gamma + beta. The CPU kernels are loops
// in batchnorm2d_cpu.cpp, the CUDA ones cuDNN's CUDNN_BATCHNORM_SPATIAL calls
// in batchnorm2d_cuda.cpp; batchnorm2d.cpp checks, dispatches and records.
//
// Gaps against PyTorch's BatchNorm2d: gamma and beta always exist (no
// affine = false), and running statistics are always kept and used in
// evaluation (no track_running_stats = false).
#pragma once

#include <cstdint>
#include <string>

#include <ddl/layers/module.hpp>

namespace ddl::layers {

// The hyper-parameters, named so that the two doubles cannot be swapped:
// BatchNorm2dOptions{.eps = 1e-3, .momentum = 0.01}. Defaults are PyTorch's.
struct BatchNorm2dOptions {
  double eps = 1e-5;      // added to the variance under the square root; > 0
  double momentum = 0.1;  // weight of the batch statistic in the running one; in [0, 1]
};

// input [N, C, H, W]; weight (gamma), bias (beta), running_mean and
// running_var [C], all float32 on the input's device.
//
// training: normalises with the batch's mean and biased variance over N, H,
//   W, and updates the running statistics in place, PyTorch's convention:
//   running = (1 - momentum) * running + momentum * batch statistic, where
//   the variance that enters running_var is the unbiased one (M / (M - 1)
//   times the biased, M = N*H*W values per channel). Needs M > 1.
// eval: normalises with running_mean and running_var; they are not changed.
//
// Differentiable with respect to input, weight and bias; in training the
// input's gradient flows through the batch statistics as well.
Tensor batch_norm2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, const BatchNorm2dOptions& options = {});

class BatchNorm2d : public Module {
 public:
  // weight = 1, bias = 0 (parameters); running_mean = 0, running_var = 1
  // (buffers); all [num_features] on cpu:0 until to() moves them.
  explicit BatchNorm2d(std::int64_t num_features, const BatchNorm2dOptions& options = {});

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string describe() const override;

  std::int64_t num_features() const { return num_features_; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const BatchNorm2dOptions& options() const { return options_; }

 private:
  std::int64_t num_features_;
  BatchNorm2dOptions options_;
  Tensor weight_, bias_, running_mean_, running_var_;
};

}  // namespace ddl::layers
