// The conv2d op and the Conv2d layer: shape checks, the dispatch of each
// pass to the CPU (conv2d_cpu.cpp) or cuDNN (conv2d_cuda.cpp) kernels, and
// the autograd node. Backward calls the backward-data, backward-filter and
// backward-bias kernels directly, and only those whose gradient is needed;
// in a pass that defers weight gradients (core/deferred_gradients.hpp), the
// input's now and the weight's and bias's later, once for several passes.
#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/deferred_gradients.hpp>
#include <ddl/core/dispatch.hpp>
#include <ddl/core/functors.hpp>
#include <ddl/core/kernels.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/conv2d_kernels.hpp>
#include <ddl/layers/init.hpp>

#include <memory>
#include <vector>

#include <fmt/format.h>

namespace ddl::layers {
namespace {

// Checks every input and works out the output's extents. Messages name
// conv2d and the shapes involved.
Conv2dGeometry geometry_of(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Conv2dOptions& options) {
  require_float(input, "conv2d");
  require_float(weight, "conv2d");
  DDL_CHECK(input.dim() == 4, "conv2d: expected a 4-D NCHW input, got shape {}", input.shape());
  DDL_CHECK(weight.dim() == 4, "conv2d: expected a 4-D weight [out, in, kh, kw], got shape {}", weight.shape());
  DDL_CHECK(weight.numel() > 0, "conv2d: weight of shape {} is empty (kernel and channel counts must be positive)",
            weight.shape());
  DDL_CHECK(input.size(1) == weight.size(1),
            "conv2d: input of shape {} has {} channels but the weight of shape {} expects {}", input.shape(),
            input.size(1), weight.shape(), weight.size(1));
  DDL_CHECK(options.stride > 0, "conv2d: stride must be positive, got {} (input {}, weight {})", options.stride,
            input.shape(), weight.shape());
  DDL_CHECK(options.dilation > 0, "conv2d: dilation must be positive, got {} (input {}, weight {})",
            options.dilation, input.shape(), weight.shape());
  DDL_CHECK(options.padding >= 0, "conv2d: padding must not be negative, got {} (input {}, weight {})",
            options.padding, input.shape(), weight.shape());
  require_same_device(input, weight, "conv2d");
  if (bias.defined()) {
    require_float(bias, "conv2d");
    DDL_CHECK(bias.shape() == Shape{weight.size(0)}, "conv2d: bias of shape {} does not match weight of shape {}",
              bias.shape(), weight.shape());
    require_same_device(input, bias, "conv2d");
  }

  Conv2dGeometry g;
  g.batch = input.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.filters = weight.size(0);
  g.kernel_h = weight.size(2);
  g.kernel_w = weight.size(3);
  g.stride = options.stride;
  g.padding = options.padding;
  g.dilation = options.dilation;
  const std::int64_t span_h = g.dilation * (g.kernel_h - 1) + 1;  // the dilated kernel's extent
  const std::int64_t span_w = g.dilation * (g.kernel_w - 1) + 1;
  const std::int64_t padded_h = g.height + 2 * g.padding, padded_w = g.width + 2 * g.padding;
  DDL_CHECK(padded_h >= span_h && padded_w >= span_w,
            "conv2d: input of shape {} padded by {} ({}x{}) is smaller than the kernel of weight {} dilated by {} "
            "({}x{})",
            input.shape(), g.padding, padded_h, padded_w, weight.shape(), g.dilation, span_h, span_w);
  g.out_height = conv2d_output_extent(g.height, g.kernel_h, options);
  g.out_width = conv2d_output_extent(g.width, g.kernel_w, options);
  return g;
}

// The gradients of conv2d's input, weight and bias (undefined where not
// needed) from the output's gradient `grad` (contiguous, on `device`,
// shaped like the output): the backward-data, backward-filter and
// backward-bias kernels, only those needed.
std::vector<Tensor> conv2d_gradients(const Conv2dGeometry& g, const Device& device, const Tensor& input,
                                     const Tensor& weight, const Tensor& grad, bool need_input, bool need_weight,
                                     bool need_bias) {
  const Shape input_shape{g.batch, g.channels, g.height, g.width};
  const Shape weight_shape{g.filters, g.channels, g.kernel_h, g.kernel_w};
  if (g.batch == 0) {  // an empty batch: no kernel to run, and empty sums
    const TensorOptions on_device{DType::Float32, device, false};
    return std::vector{need_input ? zeros(input_shape, on_device) : Tensor(),
                       need_weight ? zeros(weight_shape, on_device) : Tensor(),
                       need_bias ? zeros({g.filters}, on_device) : Tensor()};
  }
  Tensor grad_input = need_input ? empty_float(input_shape, device) : Tensor();
  Tensor grad_weight = need_weight ? empty_float(weight_shape, device) : Tensor();
  Tensor grad_bias = need_bias ? empty_float({g.filters}, device) : Tensor();
  const auto pointer = [](const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
  backend::dispatch(
      "conv2d backward", device,
      [&] {
        cpu_backend::conv2d_backward(
            g, {input, grad, grad_input, pointer(weight), pointer(grad_weight), pointer(grad_bias)});
      },
      [&](auto stream) {
        cuda_backend::conv2d_backward(stream, g,
                                      {pointer(input), pointer(weight), grad.data<float>(), pointer(grad_input),
                                       pointer(grad_weight), pointer(grad_bias)});
      });
  return std::vector{grad_input, grad_weight, grad_bias};
}

}  // namespace

std::int64_t conv2d_output_extent(std::int64_t in, std::int64_t kernel, const Conv2dOptions& options) {
  const std::int64_t span = options.dilation * (kernel - 1) + 1;  // the dilated kernel's extent
  const std::int64_t room = in + 2 * options.padding - span;
  return room < 0 ? 0 : room / options.stride + 1;
}

namespace {

// conv2d, followed by a ReLU when `relu` is set: in the convolution's own
// kernel where the backend has one that applies it, else by relu() on
// the result; one autograd node either way, which takes the output's
// gradient through the ReLU first.
Tensor convolve(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options,
                bool relu) {
  const Conv2dGeometry g = geometry_of(input, weight, bias, options);
  const Device& device = input.device();
  Tensor output = empty_float({g.batch, g.filters, g.out_height, g.out_width}, device);
  bool relu_applied = false;
  // An empty batch: nothing to compute, and cuDNN rejects empty tensors.
  if (output.numel() > 0) {
    const float* w = weight.data<float>();
    const float* b = bias.defined() ? bias.data<float>() : nullptr;
    backend::dispatch(
        "conv2d", device, [&] { relu_applied = cpu_backend::conv2d_forward(g, input, w, b, output, relu); },
        [&](auto stream) { cuda_backend::conv2d_forward(stream, g, input.data<float>(), w, b, output.data<float>()); });
  }
  // Otherwise relu()'s function, in place: the output is fresh and held
  // nowhere else, and conv2d_relu allocates the output alone either way
  // (SpatialModel::memory counts on it). In the order it is stored in.
  if (relu && !relu_applied) {
    float* values = static_cast<float*>(output.stored_data());
    backend::launch(device, output.numel(), kernels::Map1<fn::Relu>{values, values, fn::Relu{}});
  }

  if (autograd::needs_grad({&input, &weight, &bias})) {
    const bool need_input = input.requires_grad(), need_weight = weight.requires_grad();
    const bool need_bias = bias.defined() && bias.requires_grad();
    // Only a leaf weight's gradient (and a leaf bias's, from the same pass)
    // may wait for a pass that defers it (core/deferred_gradients.hpp).
    const bool deferrable = need_weight && !weight.impl()->grad_fn && (!need_bias || !bias.impl()->grad_fn);
    // The input is kept only for the weight's and the bias's gradients (the
    // CPU computes both in one pass), the weight only for the input's.
    // With the ReLU, its output is kept too: its gradient's mask, as relu()
    // keeps it, and dropped once the mask is made (unless the graph is
    // kept), so that the convolution's gradients do not run beside it.
    autograd::record(
        relu ? "Conv2dReluBackward" : "Conv2dBackward", {&input, &weight, &bias}, output,
        [g, device, input = need_weight || need_bias ? input.detach() : Tensor(),
         weight = need_input ? weight.detach() : Tensor(), relu_output = relu ? output.detach() : Tensor(), need_input,
         need_weight, need_bias, leaf = deferrable ? std::weak_ptr(weight.impl()) : std::weak_ptr<TensorImpl>(),
         bias_leaf = deferrable && need_bias ? std::weak_ptr(bias.impl()) : std::weak_ptr<TensorImpl>()](
            const Tensor& grad_output, const BackwardPass& pass) mutable {
          const Tensor grad = relu_output.defined() ? relu_backward(relu_output, grad_output) : grad_output;
          if (!pass.retain_graph) relu_output = Tensor();
          // The weight's and the bias's gradients later, for the rows of
          // several passes at once: the input and the output's gradient
          // joined along the batch.
          if (const std::shared_ptr<TensorImpl> kept = leaf.lock(); kept && pass.deferred != nullptr) {
            const auto weight_side = [g, device, need_bias](const Tensor& x, const Tensor& dy) {
              Conv2dGeometry whole = g;
              whole.batch = x.size(0);
              const std::vector<Tensor> gradients =
                  conv2d_gradients(whole, device, x, Tensor(), dy, false, true, need_bias);
              return need_bias ? std::vector{gradients[1], gradients[2]} : std::vector{gradients[1]};
            };
            std::vector<std::weak_ptr<TensorImpl>> companions;
            if (need_bias) companions.push_back(bias_leaf);
            if (pass.deferred->keep(kept, pass.part, input, grad, weight_side, std::move(companions))) {
              return conv2d_gradients(g, device, input, weight, grad, need_input, false, false);
            }
          }
          return conv2d_gradients(g, device, input, weight, grad, need_input, need_weight, need_bias);
        });
  }
  return output;
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  return convolve(input, weight, bias, options, false);
}

Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  return convolve(input, weight, bias, options, true);
}

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, Conv2dOptions options, Generator* generator)
    : in_channels_(in_channels), out_channels_(out_channels), options_(options) {
  DDL_CHECK(in_channels > 0 && out_channels > 0, "Conv2d: channel counts must be positive, got in={} out={}",
            in_channels, out_channels);
  const KernelSize kernel = options.kernel_size;
  DDL_CHECK(kernel.height > 0 && kernel.width > 0, "Conv2d: kernel_size must be positive, got {}x{}", kernel.height,
            kernel.width);
  DDL_CHECK(options.stride > 0, "Conv2d: stride must be positive, got {}", options.stride);
  DDL_CHECK(options.dilation > 0, "Conv2d: dilation must be positive, got {}", options.dilation);
  DDL_CHECK(options.padding >= 0, "Conv2d: padding must not be negative, got {}", options.padding);
  weight_ = register_parameter("weight", initial_weights({out_channels, in_channels, kernel.height, kernel.width},
                                                         Init::GlorotUniform, cpu(), generator));
  if (options.bias) bias_ = register_parameter("bias", zeros({out_channels}));
}

Tensor Conv2d::forward(const Tensor& input) { return conv2d(input, weight_, bias_, options_); }
Tensor Conv2d::forward_relu(const Tensor& input) { return conv2d_relu(input, weight_, bias_, options_); }

std::string Conv2d::parameter_layout(const std::string& name) const {
  if (name != "weight") return {};
  return fmt::format(
      "{} stores its weight as [out, in, kernel height, kernel width] = {} (OIHW, PyTorch's layout; "
      "a Keras kernel is HWIO)",
      describe(), weight_.shape());
}

std::string Conv2d::describe() const {
  const KernelSize kernel = options_.kernel_size;
  const std::string kernel_text = kernel.height == kernel.width ? std::to_string(kernel.height)
                                                                : fmt::format("({}, {})", kernel.height, kernel.width);
  return fmt::format("Conv2d({}, {}, kernel_size={}, stride={}, padding={}, dilation={}{})", in_channels_,
                     out_channels_, kernel_text, options_.stride, options_.padding, options_.dilation,
                     bias_.defined() ? "" : ", bias=false");
}

}  // namespace ddl::layers
