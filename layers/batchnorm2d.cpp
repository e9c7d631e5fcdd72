// batch_norm2d: argument checks, dispatch to the CPU loops or cuDNN, the
// autograd records, and the BatchNorm2d module that owns gamma, beta and the
// running statistics.
#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/dispatch.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/batchnorm2d_kernels.hpp>

#include <fmt/format.h>

namespace ddl::layers {

using batchnorm2d_detail::Geometry;

namespace {

constexpr const char* kOp = "batch_norm2d";

void check_options(const BatchNorm2dOptions& options, const char* who) {
  DDL_CHECK(options.eps > 0.0, "{}: eps must be positive, got {}", who, options.eps);
  DDL_CHECK(options.momentum >= 0.0 && options.momentum <= 1.0, "{}: momentum must be in [0, 1], got {}", who,
            options.momentum);
}

void check_per_channel(const Tensor& input, const Tensor& t, const char* name) {
  DDL_CHECK(t.defined(), "{}: {} is undefined", kOp, name);
  require_float(t, kOp);
  DDL_CHECK(t.shape() == Shape{input.size(1)}, "{}: input of shape {} has {} channels, but {} has shape {}", kOp,
            input.shape(), input.size(1), name, t.shape());
  require_same_device(input, t, kOp);
}

// Sums a [N, C, H, W] tensor to [C].
Tensor sum_per_channel(const Tensor& t) { return sum(sum(sum(t, 3), 2), 0); }

// Training: batch statistics, running statistics updated, backward through
// the statistics (the kernels' own formula, on the saved mean and invstd).
Tensor forward_training(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, double momentum, double eps, const Geometry& g) {
  DDL_CHECK(g.per_channel() > 1,
            "{}: training needs more than one value per channel to compute a variance, got input of shape {}", kOp,
            input.shape());
  const Device& device = input.device();
  Tensor output = empty_float(input.shape(), device);
  Tensor save_mean = empty_float({g.channels}, device);
  Tensor save_invstd = empty_float({g.channels}, device);
  const batchnorm2d_detail::ForwardTraining buffers{.x = input.data<float>(),
                                                    .gamma = weight.data<float>(),
                                                    .beta = bias.data<float>(),
                                                    .y = output.data<float>(),
                                                    .running_mean = running_mean.data<float>(),
                                                    .running_var = running_var.data<float>(),
                                                    .save_mean = save_mean.data<float>(),
                                                    .save_invstd = save_invstd.data<float>()};
  // No channels: nothing to normalise, and cuDNN rejects empty tensors.
  if (output.numel() > 0) {
    backend::dispatch(
        "batch_norm2d training", device, [&] { batchnorm2d_detail::forward_training_cpu(g, buffers, momentum, eps); },
        [&](auto stream) { batchnorm2d_detail::forward_training_cuda(stream, g, buffers, momentum, eps); });
  }
  if (autograd::needs_grad({&input, &weight, &bias})) {
    autograd::record(
        "BatchNorm2dBackward", {&input, &weight, &bias}, output,
        [g, eps, x = input.detach(), gamma = weight.detach(), save_mean, save_invstd](const Tensor& grad) {
          const Device& on = grad.device();
          Tensor dx = empty_float(x.shape(), on);
          Tensor dgamma = empty_float({g.channels}, on);
          Tensor dbeta = empty_float({g.channels}, on);
          const batchnorm2d_detail::BackwardTraining buffers{.x = x.data<float>(),
                                                             .dy = grad.data<float>(),
                                                             .gamma = gamma.data<float>(),
                                                             .save_mean = save_mean.data<float>(),
                                                             .save_invstd = save_invstd.data<float>(),
                                                             .dx = dx.data<float>(),
                                                             .dgamma = dgamma.data<float>(),
                                                             .dbeta = dbeta.data<float>()};
          // No channels: every gradient is empty.
          if (x.numel() > 0) {
            backend::dispatch(
                "batch_norm2d backward", on, [&] { batchnorm2d_detail::backward_training_cpu(g, buffers); },
                [&](auto stream) { batchnorm2d_detail::backward_training_cuda(stream, g, buffers, eps); });
          }
          return std::vector{dx, dgamma, dbeta};
        });
  }
  return output;
}

// Evaluation: the running statistics make y an affine map of x per channel,
// y = x_hat * gamma + beta with x_hat = (x - mean) * invstd; its backward is
// written with core ops, so it runs on every device.
Tensor forward_inference(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                         const Tensor& running_var, double eps, const Geometry& g) {
  const Device& device = input.device();
  Tensor output = empty_float(input.shape(), device);
  const batchnorm2d_detail::ForwardInference buffers{.x = input.data<float>(),
                                                     .gamma = weight.data<float>(),
                                                     .beta = bias.data<float>(),
                                                     .running_mean = running_mean.data<float>(),
                                                     .running_var = running_var.data<float>(),
                                                     .y = output.data<float>()};
  // Nothing to normalise (N, H or W is 0); cuDNN rejects empty tensors.
  if (output.numel() > 0) {
    backend::dispatch(
        "batch_norm2d inference", device, [&] { batchnorm2d_detail::forward_inference_cpu(g, buffers, eps); },
        [&](auto stream) { batchnorm2d_detail::forward_inference_cuda(stream, g, buffers, eps); });
  }
  if (autograd::needs_grad({&input, &weight, &bias})) {
    // Copies of the statistics as they are now: a later training step
    // updates the running buffers in place.
    Tensor mean, invstd;
    {
      const NoGradGuard no_grad;
      mean = running_mean.clone();
      invstd = pow(running_var + static_cast<float>(eps), -0.5f);
    }
    autograd::record("BatchNorm2dEvalBackward", {&input, &weight, &bias}, output,
                     [x = input.detach(), gamma = weight.detach(), mean, invstd](const Tensor& grad) {
                       const Shape channel{1, x.size(1), 1, 1};
                       const Tensor x_hat = (x - mean.reshape(channel)) * invstd.reshape(channel);
                       Tensor dx = grad * (gamma * invstd).reshape(channel);
                       return std::vector{dx, sum_per_channel(grad * x_hat), sum_per_channel(grad)};
                     });
  }
  return output;
}

}  // namespace

Tensor batch_norm2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, const BatchNorm2dOptions& options) {
  require_float(input, kOp);
  DDL_CHECK(input.dim() == 4, "{}: expected a 4-D NCHW input, got shape {}", kOp, input.shape());
  check_per_channel(input, weight, "weight");
  check_per_channel(input, bias, "bias");
  check_per_channel(input, running_mean, "running_mean");
  check_per_channel(input, running_var, "running_var");
  check_options(options, kOp);
  Geometry g{};
  g.batch = input.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  return training ? forward_training(input, weight, bias, running_mean, running_var, options.momentum, options.eps, g)
                  : forward_inference(input, weight, bias, running_mean, running_var, options.eps, g);
}

BatchNorm2d::BatchNorm2d(std::int64_t num_features, const BatchNorm2dOptions& options)
    : num_features_(num_features), options_(options) {
  DDL_CHECK(num_features > 0, "BatchNorm2d: num_features must be positive, got {}", num_features);
  check_options(options, "BatchNorm2d");
  weight_ = register_parameter("weight", ones({num_features}));
  bias_ = register_parameter("bias", zeros({num_features}));
  running_mean_ = register_buffer("running_mean", zeros({num_features}));
  running_var_ = register_buffer("running_var", ones({num_features}));
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  DDL_CHECK(input.defined() && input.dim() == 4, "{}: expected a 4-D NCHW input, got shape {}", describe(),
            input.defined() ? input.shape() : Shape{});
  DDL_CHECK(input.size(1) == num_features_, "{}: input of shape {} has {} channels, expected {}", describe(),
            input.shape(), input.size(1), num_features_);
  return batch_norm2d(input, weight_, bias_, running_mean_, running_var_, is_training(), options_);
}

std::string BatchNorm2d::describe() const {
  return fmt::format("BatchNorm2d({}, eps={}, momentum={})", num_features_, options_.eps, options_.momentum);
}

}  // namespace ddl::layers
