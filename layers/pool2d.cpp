// max_pool2d / avg_pool2d: argument checks, the output geometry, dispatch to
// the CPU loops or cuDNN, and the autograd records.
#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/cpu/onednn.hpp>
#include <ddl/core/dispatch.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/pool2d_kernels.hpp>

#include <fmt/format.h>

#include <limits>
#include <span>
#include <type_traits>

namespace ddl::layers {

using pool2d_detail::Geometry;
using pool2d_detail::Mode;

namespace {

// The checks that need no input, shared by the functional ops and the modules.
void check_options(const Pool2dOptions& options, const char* who) {
  DDL_CHECK(options.kernel_size > 0, "{}: kernel_size must be positive, got {}", who, options.kernel_size);
  DDL_CHECK(options.stride >= 0, "{}: stride must be positive (or 0 for stride = kernel_size), got {}", who,
            options.stride);
  DDL_CHECK(options.padding >= 0, "{}: padding must be non-negative, got {}", who, options.padding);
  // Wider padding would give windows that lie wholly in the padding.
  DDL_CHECK(options.padding <= options.kernel_size / 2,
            "{}: padding {} is more than half the kernel size {} (at most {})", who, options.padding,
            options.kernel_size, options.kernel_size / 2);
}

Geometry geometry_of(const Tensor& input, const Pool2dOptions& options, const char* who) {
  check_options(options, who);
  require_float(input, who);
  DDL_CHECK(input.dim() == 4, "{}: expected a 4-D NCHW input, got shape {}", who, input.shape());
  const std::int64_t k = options.kernel_size, p = options.padding;
  const std::int64_t padded_h = input.size(2) + 2 * p, padded_w = input.size(3) + 2 * p;
  DDL_CHECK(k <= padded_h && k <= padded_w,
            "{}: kernel {}x{} is larger than the input of shape {} with padding {} ({}x{})", who, k, k, input.shape(),
            p, padded_h, padded_w);
  const std::int64_t s = options.window_stride();
  Geometry g{};
  g.batch = input.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.out_height = pool2d_output_extent(g.height, options);
  g.out_width = pool2d_output_extent(g.width, options);
  g.kernel = k;
  g.stride = s;
  g.padding = p;
  g.ceil_mode = options.ceil_mode;
  g.count_include_pad = options.count_include_pad;
  return g;
}

// The elements of a CPU tensor as a span.
template <class T>
std::span<T> elements(const Tensor& t) {
  return {t.data<std::remove_const_t<T>>(), static_cast<std::size_t>(t.numel())};
}

// The elements of a CPU tensor as they are stored (core/memory_form.hpp).
std::span<const float> stored_elements(const Tensor& t) {
  return {static_cast<const float*>(t.stored_data()), static_cast<std::size_t>(t.numel())};
}

// The CPU's max pooling winners: where the gradient goes (8 bytes per
// output, rather than the input; 4 in channel blocks), in the order of the
// output, and the channel block that order has (0: NCHW).
struct Winners {
  Tensor argmax;
  int block = 0;
};

// The CPU's forward loops. Max pooling returns the winners where a gradient
// will need them; average pooling needs nothing. Max pooling reads an
// input a convolution left in oneDNN's channel-blocked layout as it is,
// and leaves its output in that layout too, so that the gradient's way
// back to that convolution needs no reorder either.
Winners forward_cpu(const Tensor& input, Tensor& output, const Geometry& g, Mode mode, bool wants_grad) {
  if (mode == Mode::Average) {
    pool2d_detail::avg_forward_cpu(g, elements<const float>(input), elements<float>(output));
    return {};
  }
  // (A plane's positions must fit the blocked loops' 32 bits.)
  const bool fits = g.height * g.width <= std::numeric_limits<std::int32_t>::max();
  Winners winners{Tensor(), fits ? cpu_backend::onednn::channel_block(input) : 0};
  const bool blocked = winners.block != 0;
  if (wants_grad) {
    winners.argmax = Tensor::empty(output.shape(), {blocked ? DType::Int32 : DType::Int64, input.device(), false});
  }
  const auto argmax = [&]<class T>(T /*type*/) { return wants_grad ? elements<T>(winners.argmax) : std::span<T>(); };
  if (!blocked) {
    pool2d_detail::max_forward_cpu(g, elements<const float>(input), elements<float>(output), argmax(std::int64_t{}));
    return winners;
  }
  pool2d_detail::max_forward_blocked_cpu(g, winners.block, stored_elements(input), elements<float>(output),
                                         argmax(std::int32_t{}));
  output.set_stored_form(cpu_backend::onednn::channel_blocked(output.shape().to_vector(), winners.block));
  return winners;
}

void backward_cpu(const Tensor& grad, const Winners& winners, Tensor& grad_in, const Geometry& g, Mode mode) {
  if (mode == Mode::Average) {
    pool2d_detail::avg_backward_cpu(g, elements<const float>(grad), elements<float>(grad_in));
  } else if (winners.block == 0) {
    pool2d_detail::max_backward_cpu(g, elements<const float>(grad), elements<const std::int64_t>(winners.argmax),
                                    elements<float>(grad_in));
  } else {
    const bool grad_blocked = cpu_backend::onednn::channel_block(grad) == winners.block;
    pool2d_detail::max_backward_blocked_cpu(
        g, winners.block, grad_blocked ? stored_elements(grad) : elements<const float>(grad), grad_blocked,
        elements<const std::int32_t>(winners.argmax), elements<float>(grad_in));
    grad_in.set_stored_form(cpu_backend::onednn::channel_blocked(grad_in.shape().to_vector(), winners.block));
  }
}

Tensor pool2d(const Tensor& input, const Pool2dOptions& options, Mode mode) {
  const bool max = mode == Mode::Max;
  const char* who = max ? "max_pool2d" : "avg_pool2d";
  const Geometry g = geometry_of(input, options, who);
  const Device& device = input.device();
  Tensor output = empty_float({g.batch, g.channels, g.out_height, g.out_width}, device);
  // Output is empty exactly when input is (N or C is 0): there is nothing
  // to compute, and cuDNN rejects empty tensors.
  const bool empty = output.numel() == 0;
  const bool wants_grad = autograd::needs_grad({&input});
  Winners winners;  // the CPU's max pooling's
  backend::dispatch(
      who, device, [&] { winners = forward_cpu(input, output, g, mode, wants_grad); },
      [&](auto stream) {
        if (!empty) pool2d_detail::forward_cuda(stream, mode, g, input.data<float>(), output.data<float>());
      });
  if (!wants_grad) return output;
  // cuDNN's backward reads x and y, kept detached so that the node does not
  // own the tensor that owns it; the CPU's reads only the winners.
  const bool on_gpu = device.is_cuda();
  autograd::record(max ? "MaxPool2dBackward" : "AvgPool2dBackward", {&input}, output,
                   [g, mode, device, empty, winners, x = on_gpu ? input.detach() : Tensor(),
                    y = on_gpu ? output.detach() : Tensor()](const Tensor& grad) {
                     Tensor grad_in = empty_float({g.batch, g.channels, g.height, g.width}, device);
                     if (empty) return std::vector{grad_in};
                     backend::dispatch(
                         mode == Mode::Max ? "max_pool2d backward" : "avg_pool2d backward", device,
                         [&] { backward_cpu(grad, winners, grad_in, g, mode); },
                         [&](auto stream) {
                           pool2d_detail::backward_cuda(stream, mode, g, x.data<float>(), y.data<float>(),
                                                        grad.data<float>(), grad_in.data<float>());
                         });
                     return std::vector{grad_in};
                   });
  return output;
}

// Options at their defaults are left out.
std::string describe_pool(const char* type, const Pool2dOptions& options, bool is_average) {
  return fmt::format("{}(kernel_size={}, stride={}, padding={}{}{})", type, options.kernel_size,
                     options.window_stride(), options.padding, options.ceil_mode ? ", ceil_mode=true" : "",
                     is_average && !options.count_include_pad ? ", count_include_pad=false" : "");
}

}  // namespace

std::int64_t pool2d_output_extent(std::int64_t in, const Pool2dOptions& options) {
  const std::int64_t stride = options.window_stride();
  const std::int64_t room = in + 2 * options.padding - options.kernel_size;
  if (room < 0) return 0;
  std::int64_t extent = (options.ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  // PyTorch's rule: a ceil_mode window may not start in the right padding.
  if (options.ceil_mode && (extent - 1) * stride >= in + options.padding) --extent;
  return extent;
}

Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options) { return pool2d(input, options, Mode::Max); }

Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options) { return pool2d(input, options, Mode::Average); }

MaxPool2d::MaxPool2d(const Pool2dOptions& options) : options_(options) { check_options(options, "MaxPool2d"); }
Tensor MaxPool2d::forward(const Tensor& input) { return max_pool2d(input, options_); }
std::string MaxPool2d::describe() const { return describe_pool("MaxPool2d", options_, false); }

AvgPool2d::AvgPool2d(const Pool2dOptions& options) : options_(options) { check_options(options, "AvgPool2d"); }
Tensor AvgPool2d::forward(const Tensor& input) { return avg_pool2d(input, options_); }
std::string AvgPool2d::describe() const { return describe_pool("AvgPool2d", options_, true); }

}  // namespace ddl::layers
