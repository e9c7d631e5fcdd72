// Conv2d on the CPU through oneDNN's convolution primitives (the CPU's
// cuDNN; core/cpu/onednn.hpp has the plumbing).
//
// Each direction is one primitive: forward (Y = W * X + b), backward-data
// (dX from dY and W) and backward-weights (dW, from X and dY). The tensors
// are NCHW / OIHW; the primitives are created for whatever layout oneDNN
// runs fastest in (`format_tag::any`, on AVX-512 channels blocked by 16),
// and the operands are reordered into it, unless an activation or its
// gradient is in it already: the output and the input's gradient stay in
// it (core/memory_form.hpp), so that a ReLU and the next convolution read
// them unreordered, and any other reader gets NCHW.
//
// The algorithm follows config::cpu_convolution() (wanted_algorithm below):
// by default oneDNN's choice where the channel counts are multiples of 16,
// direct elsewhere. For large 3x3 convolutions at stride 1 that choice is
// Winograd's F(4x4, 3x3) (Lavin & Gray 2016), which computes each 6x6 input
// tile's 4x4 outputs in 36 multiplications per channel pair instead of 144,
// 2-4x faster here, at a rounding error a few times the direct sum's.
// oneDNN has that kernel for AVX-512 only; where it has none (AVX2 CPUs),
// the same convolutions run on ddl's own F(4x4, 3x3)
// (conv2d_winograd_cpu.cpp), 1.3-1.7x faster than oneDNN's direct kernel
// there (docs/PERFORMANCE.md). On AVX-512 oneDNN's was the faster of the
// two where measured: the MNIST CNN's step ran 1-8% faster on it on one
// Zen 5 core, though ddl's kernels need none of the reorders below (Intel's
// AVX-512 is not measured). `ddl-winograd` runs ddl's there too, for every
// 3x3 convolution it applies to (docs/PERFORMANCE.md says how the two were
// compared).
// A ReLU after the convolution (conv2d_relu) runs inside the forward
// primitive, on each sum before it is stored (an eltwise post-op): the
// pass over the output that relu() would make is saved (~4 ms of a 65 ms
// MNIST CNN step on one Sapphire Rapids core), where fused_relu below
// says it may; elsewhere conv2d.cpp applies relu()'s function after. ddl's
// Winograd kernels apply relu()'s function itself as they store each
// output, fused always.
// The weight's gradient of a convolution with fewer than 8 input channels
// (a first layer's), which oneDNN pads to its block of channels, comes
// from unfolding the input instead (conv2d_unfold_cpu.cpp).
//
// Measured alternative: im2col + one Eigen GEMM per image (Chellapilla et
// al. 2006; ddl's kernel until oneDNN replaced it) ran the Keras MNIST CNN's
// 32->64 convolution forward and backward at ~72 GFLOP/s on one Zen 4 core,
// oneDNN's direct kernel at ~105 and its Winograd kernel at the equivalent of
// ~170 (docs/PERFORMANCE.md).
//
// Precision follows config::cpu_precision(): float32, or bf16 mixed
// precision, where the reorders into oneDNN's layout also round X, W and dY
// to bfloat16, the primitives multiply those and sum in float32, and Y, dX,
// dW and db come out float32 (products_type below). The bias stays float32.
//
// Determinism: a result is the same bits run after run for the same thread
// count. Across thread counts oneDNN promises nothing: its backward-weights
// splits the sum over the batch by thread, so the 32->64 layer of the
// MNIST CNN gives other last bits of dW and db at 2 threads than at 1
// (docs/PERFORMANCE.md).
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cpu/onednn.hpp>
#include <ddl/layers/conv2d_kernels.hpp>
#include <ddl/layers/conv2d_unfold.hpp>
#include <ddl/layers/conv2d_winograd.hpp>

#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace ddl::cpu_backend {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using onednn::Slot;

// The operands' type in the products: float32, or bfloat16 under bf16 mixed
// precision. Results are float32 either way.
memory::data_type products_type() {
  return config::cpu_precision() == config::CpuPrecision::BFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

memory::desc any_layout(const memory::dims& dims, memory::data_type type = memory::data_type::f32) {
  return {dims, type, Tag::any};
}

memory::dims input_dims(const Conv2dGeometry& g) { return {g.batch, g.channels, g.height, g.width}; }
memory::dims weight_dims(const Conv2dGeometry& g) { return {g.filters, g.channels, g.kernel_h, g.kernel_w}; }
memory::dims output_dims(const Conv2dGeometry& g) { return {g.batch, g.filters, g.out_height, g.out_width}; }

// One geometry's primitives, created the first time each direction runs.
struct Convolution {
  dnnl::algorithm algorithm;  // the backward primitives' too
  bool own_winograd;          // runs on ddl's Winograd kernels instead (conv2d_winograd_cpu.cpp)
  // With the ReLU post-op: whether the forward kernel is the one the
  // geometry runs without it (fused_relu below). Always true without.
  bool same_kernel_as_unfused;
  dnnl::convolution_forward::primitive_desc forward_pd;
  dnnl::convolution_forward forward;
  std::optional<std::pair<dnnl::convolution_backward_data::primitive_desc, dnnl::convolution_backward_data>>
      backward_data;
  std::optional<std::pair<dnnl::convolution_backward_weights::primitive_desc, dnnl::convolution_backward_weights>>
      backward_weights;
};

// What a convolution's primitives depend on. Bias or not is part of it
// because backward-weights computes the bias gradient when there is one;
// the fused ReLU changes the forward primitive only (the backward
// primitives of a fused geometry are those of the unfused one's entry).
using Key =
    std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
               std::int64_t, std::int64_t, std::int64_t, bool, bool, config::CpuConvolution, config::CpuPrecision>;

Key key_of(const Conv2dGeometry& g, bool bias, bool relu) {
  return {g.batch,
          g.channels,
          g.height,
          g.width,
          g.filters,
          g.kernel_h,
          g.kernel_w,
          g.stride,
          g.padding,
          g.dilation,
          bias,
          relu,
          config::cpu_convolution(),
          config::cpu_precision()};
}

// The algorithm to ask oneDNN for (config::CpuConvolution). Winograd and
// oneDNN's own choice only where the channels fill its blocks of 16: left
// to itself, oneDNN took Winograd for the 1->32 convolution too, padding
// the one input channel to 16 and running 5x slower than direct.
dnnl::algorithm wanted_algorithm(const Conv2dGeometry& g) {
  constexpr std::int64_t kBlock = 16;
  const bool blocks_fill = g.channels % kBlock == 0 && g.filters % kBlock == 0;
  const bool winograd_shape = blocks_fill && g.kernel_h == 3 && g.kernel_w == 3 && g.stride == 1 && g.dilation == 1;
  switch (config::cpu_convolution()) {
    case config::CpuConvolution::Auto:
      return blocks_fill ? dnnl::algorithm::convolution_auto : dnnl::algorithm::convolution_direct;
    case config::CpuConvolution::Winograd:
    case config::CpuConvolution::DdlWinograd:
      return winograd_shape ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
    case config::CpuConvolution::Direct:
      break;
  }
  return dnnl::algorithm::convolution_direct;
}

// Whether g should run on ddl's own Winograd kernels if oneDNN has none
// (or, for ddl-winograd, even if it has one): in float32, where oneDNN's
// choice is asked for (the channels fill its blocks) and they pay off, or
// wherever they apply when Winograd is asked for.
bool wanted_winograd(const Conv2dGeometry& g) {
  if (config::cpu_precision() != config::CpuPrecision::Float32) return false;
  switch (config::cpu_convolution()) {
    case config::CpuConvolution::Auto:
      return wanted_algorithm(g) == dnnl::algorithm::convolution_auto && winograd::pays_off(g);
    case config::CpuConvolution::Winograd:
    case config::CpuConvolution::DdlWinograd:
      return winograd::applies(g);
    case config::CpuConvolution::Direct:
      break;
  }
  return false;
}

// Strides, padding and dilation as oneDNN counts them (dilation 0 = dense).
struct Steps {
  memory::dims strides, padding, dilation;
};
Steps steps_of(const Conv2dGeometry& g) {
  return {{g.stride, g.stride}, {g.padding, g.padding}, {g.dilation - 1, g.dilation - 1}};
}

// A ReLU run by the forward primitive on each sum before it is stored (a
// post-op): max(sum, 0), which makes a NaN sum 0.
dnnl::primitive_attr forward_attributes(bool relu) {
  dnnl::primitive_attr attributes = onednn::user_scratchpad();
  if (relu) {
    dnnl::post_ops post_ops;
    post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attributes.set_post_ops(post_ops);
  }
  return attributes;
}

Convolution make_convolution(const Conv2dGeometry& g, bool bias, bool relu) {
  const Steps s = steps_of(g);
  const memory::desc bias_desc = bias ? memory::desc({g.filters}, memory::data_type::f32, Tag::x) : memory::desc();
  const auto forward_pd = [&](dnnl::algorithm algorithm, bool with_relu) {
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, algorithm,
                                            any_layout(input_dims(g), products_type()),
                                            any_layout(weight_dims(g), products_type()), bias_desc,
                                            any_layout(output_dims(g)), s.strides, s.dilation, s.padding, s.padding);
    return dnnl::convolution_forward::primitive_desc(d, forward_attributes(with_relu), onednn::engine());
  };
  // The primitive for `algorithm`, or none where oneDNN has no kernel for
  // it (Winograd without AVX-512, or in bf16).
  const auto kernel_for = [&](dnnl::algorithm algorithm,
                              bool with_relu) -> std::optional<dnnl::convolution_forward::primitive_desc> {
    try {
      return forward_pd(algorithm, with_relu);
    } catch (const dnnl::error& error) {
      if (error.status != dnnl_unimplemented) throw;
      return std::nullopt;
    }
  };
  // The wanted algorithm's primitive, or the direct one where it has none.
  const auto chosen = [&](bool with_relu) {
    const dnnl::algorithm wanted = wanted_algorithm(g);
    auto pd = onednn::describe("conv2d forward", [&] { return kernel_for(wanted, with_relu); });
    if (pd) return std::pair{wanted, *pd};
    const dnnl::algorithm direct = dnnl::algorithm::convolution_direct;
    return std::pair{direct, onednn::describe("conv2d forward", [&] { return forward_pd(direct, with_relu); })};
  };
  const auto [algorithm, pd] = chosen(relu);
  // ddl's own Winograd kernels take the place of oneDNN's where it has
  // none, or where they are asked for by name.
  const auto onednn_has_winograd = [&] {
    return onednn::describe("conv2d forward", [&] { return kernel_for(dnnl::algorithm::convolution_winograd, false); })
        .has_value();
  };
  const bool own_winograd = wanted_winograd(g) && (config::cpu_convolution() == config::CpuConvolution::DdlWinograd ||
                                                   !onednn_has_winograd());
  // The post-op may change oneDNN's choice of kernel (Winograd or direct
  // under `auto`, or another implementation): compared once, here.
  const bool same_kernel =
      !relu || std::string_view(chosen(false).second.impl_info_str()) == std::string_view(pd.impl_info_str());
  return {algorithm, own_winograd, same_kernel, pd, dnnl::convolution_forward(pd), std::nullopt, std::nullopt};
}

// The primitives of `g`, made once per geometry and shared by every thread
// (a primitive may run on several threads at once).
std::shared_ptr<Convolution> convolution_of(const Conv2dGeometry& g, bool bias, bool relu = false) {
  static onednn::Cache<Key, Convolution> cache;
  return cache.get(key_of(g, bias, relu), [&] { return make_convolution(g, bias, relu); });
}

// Whether all n values are finite (a count, so that the loop vectorises).
bool all_finite(const float* values, std::int64_t n) {
  std::int64_t not_finite = 0;
  for (std::int64_t i = 0; i < n; ++i) not_finite += std::isfinite(values[i]) ? 0 : 1;
  return not_finite == 0;
}

// The primitive that runs g's forward with oneDNN's ReLU fused, or null
// where it should run as g's primitive without the ReLU. oneDNN's ReLU
// makes a NaN sum 0, where relu() keeps it: a weight or bias that is not
// finite (a diverged model's, the usual source of NaN sums) runs unfused,
// so its NaNs reach the loss. Checking them must cost less than the pass
// the fusion saves: not where they outnumber the outputs (a late layer's
// small image). And the fused primitive must be the same kernel as the
// unfused one (same_kernel_as_unfused): another, oneDNN's choice under
// `auto` (Winograd or direct) among them, would sum in another order and
// give other bits.
std::shared_ptr<const Convolution> fused_relu(const Conv2dGeometry& g, const float* weight, const float* bias) {
  const std::int64_t parameters = g.weight_size() + (bias == nullptr ? 0 : g.filters);
  if (parameters >= g.batch * g.output_image_size()) return nullptr;
  if (!all_finite(weight, g.weight_size()) || (bias != nullptr && !all_finite(bias, g.filters))) return nullptr;
  std::shared_ptr<const Convolution> fused = convolution_of(g, bias != nullptr, true);
  return fused->same_kernel_as_unfused ? fused : nullptr;
}

void add_backward_data(const Conv2dGeometry& g, Convolution& c) {
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  if (c.backward_data) return;
  const Steps s = steps_of(g);
  auto pd = onednn::describe("conv2d backward-data", [&] {
    const dnnl::convolution_backward_data::desc d(
        c.algorithm, any_layout(input_dims(g)), any_layout(weight_dims(g), products_type()),
        any_layout(output_dims(g), products_type()), s.strides, s.dilation, s.padding, s.padding);
    return dnnl::convolution_backward_data::primitive_desc(d, onednn::user_scratchpad(), onednn::engine(),
                                                           c.forward_pd);
  });
  c.backward_data.emplace(pd, dnnl::convolution_backward_data(pd));
}

void add_backward_weights(const Conv2dGeometry& g, Convolution& c) {
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  if (c.backward_weights) return;
  const Steps s = steps_of(g);
  auto pd = onednn::describe("conv2d backward-filter", [&] {
    const dnnl::convolution_backward_weights::desc d(
        c.algorithm, any_layout(input_dims(g), products_type()), any_layout(weight_dims(g)), c.forward_pd.bias_desc(),
        any_layout(output_dims(g), products_type()), s.strides, s.dilation, s.padding, s.padding);
    return dnnl::convolution_backward_weights::primitive_desc(d, onednn::user_scratchpad(), onednn::engine(),
                                                              c.forward_pd);
  });
  c.backward_weights.emplace(pd, dnnl::convolution_backward_weights(pd));
}

memory scratchpad_for(const memory::desc& desc) {
  return memory(desc, onednn::engine(), onednn::staging(Slot::Scratchpad, desc.get_size()));
}

}  // namespace

bool conv2d_forward(const Conv2dGeometry& g, const Tensor& input, const float* weight, const float* bias,
                    const Tensor& output, bool relu) {
  const std::shared_ptr<const Convolution> unfused = convolution_of(g, bias != nullptr);
  // ddl's Winograd kernels apply relu()'s own function: nothing to check.
  if (unfused->own_winograd) {
    winograd::forward(g, input.data<float>(), weight, bias, output.data<float>(), relu);
    return relu;
  }
  const std::shared_ptr<const Convolution> fused = relu ? fused_relu(g, weight, bias) : nullptr;
  relu = fused != nullptr;
  const Convolution& c = relu ? *fused : *unfused;
  const auto& pd = c.forward_pd;
  const memory x = onednn::to_layout(onednn::stored(input, input_dims(g), Tag::nchw), pd.src_desc(), Slot::Input,
                                     "conv2d forward: reordering the input");
  const memory w = onednn::to_layout(onednn::wrap(weight_dims(g), Tag::oihw, weight), pd.weights_desc(), Slot::Weights,
                                     "conv2d forward: reordering the weight");
  const onednn::Result y(output, output_dims(g), Tag::nchw, pd.dst_desc(), Slot::Output);
  onednn::Arguments arguments{{DNNL_ARG_SRC, x},
                              {DNNL_ARG_WEIGHTS, w},
                              {DNNL_ARG_DST, y.memory()},
                              {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd.scratchpad_desc())}};
  if (bias != nullptr) arguments.emplace(DNNL_ARG_BIAS, onednn::wrap({g.filters}, Tag::x, bias));
  onednn::execute("conv2d forward", c.forward, arguments);
  y.finish("conv2d forward: reordering the output");
  return relu;
}

std::string conv2d_implementation(const Conv2dGeometry& g) {
  const std::shared_ptr<const Convolution> held = convolution_of(g, false);
  return held->own_winograd ? "ddl_winograd_4x3" : held->forward_pd.impl_info_str();
}

Conv2dStaging conv2d_forward_staging(const Conv2dGeometry& g) {
  const std::shared_ptr<const Convolution> held = convolution_of(g, false);
  if (held->own_winograd) return winograd::forward_staging(g);
  const auto& pd = held->forward_pd;
  // A slot is used only when the layouts differ (onednn::to_layout).
  const auto staged = [](const memory::dims& dims, Tag plain, const memory::desc& wanted) {
    const memory::desc user(dims, memory::data_type::f32, plain);
    return user == wanted ? std::size_t{0} : wanted.get_size();
  };
  Conv2dStaging staging;
  staging.caller = {staged(input_dims(g), Tag::nchw, pd.src_desc()),
                    staged(weight_dims(g), Tag::oihw, pd.weights_desc()),
                    staged(output_dims(g), Tag::nchw, pd.dst_desc()), pd.scratchpad_desc().get_size()};
  return staging;
}

namespace {

// conv2d_bias_gradient in blocks of B channels (B = 1: NCHW), pixel p of
// channel k of image n at ((n K/B + k/B) P + p) B + k % B. Each channel
// sums into kLanes partial sums, pixel p into partial p % kLanes, images
// and pixels in order, whatever B: the same bits in any layout and on any
// thread count. The loop over a block's B channels is the vectorised one
// (over the partials where B = 1).
template <std::int64_t B>
void bias_gradient_in_blocks(const Conv2dGeometry& g, const float* grad_output, float* grad_bias) {
  constexpr std::int64_t kLanes = 16;
  const std::int64_t pixels = g.out_pixels(), blocks = g.filters / B;
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    float partial[kLanes][B] = {};
    for (std::int64_t n = 0; n < g.batch; ++n) {
      const float* block = grad_output + (n * blocks + b) * pixels * B;
      std::int64_t p = 0;
      for (; p + kLanes <= pixels; p += kLanes) {
        for (std::int64_t j = 0; j < kLanes; ++j) {
          for (std::int64_t l = 0; l < B; ++l) partial[j][l] += block[(p + j) * B + l];
        }
      }
      for (; p < pixels; ++p) {
        for (std::int64_t l = 0; l < B; ++l) partial[p % kLanes][l] += block[p * B + l];
      }
    }
    for (std::int64_t l = 0; l < B; ++l) {
      float sum = 0;
      for (std::int64_t j = 0; j < kLanes; ++j) sum += partial[j][l];
      grad_bias[b * B + l] = sum;
    }
  }
}

}  // namespace

void conv2d_bias_gradient(const Conv2dGeometry& g, const float* grad_output, int block, float* grad_bias) {
  if (block == 16) return bias_gradient_in_blocks<16>(g, grad_output, grad_bias);
  if (block == 8) return bias_gradient_in_blocks<8>(g, grad_output, grad_bias);
  DDL_CHECK(block == 0, "conv2d bias gradient: channel blocks of {} (0, 8 or 16)", block);
  bias_gradient_in_blocks<1>(g, grad_output, grad_bias);
}

void conv2d_backward(const Conv2dGeometry& g, const Conv2dBackwardTensors& operands) {
  // Backward-weights gives the bias gradient as well; a frozen weight's
  // gradient (only the bias's wanted) goes to a staging buffer.
  const bool with_bias = operands.grad_bias != nullptr;
  const bool weight_side = operands.grad_weight != nullptr || with_bias;
  const bool need_input = operands.grad_input.defined();
  const std::shared_ptr<Convolution> held = convolution_of(g, with_bias);
  Convolution& c = *held;
  const auto row_major = [](const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
  if (c.own_winograd) {
    return winograd::backward(g, {row_major(operands.input), operands.weight, row_major(operands.grad_output),
                                  row_major(operands.grad_input), operands.grad_weight, operands.grad_bias});
  }
  // The weight's side by unfolding where oneDNN would pad few channels to
  // a block; the input's side stays oneDNN's. (Before any stored()
  // below: reading row-major may move a tensor's bytes.)
  const bool unfold = weight_side && products_type() == memory::data_type::f32 && unfolded::suits(g);
  if (unfold) {
    // The input row-major first: where it shares the gradient's storage,
    // that moves the gradient's bytes too. The gradient as it is stored,
    // in channel blocks where the next convolution left it so.
    const float* x = row_major(operands.input);
    const int block = onednn::channel_block(operands.grad_output);
    const float* dy =
        block != 0 ? static_cast<const float*>(operands.grad_output.stored_data()) : row_major(operands.grad_output);
    unfolded::backward_weights(g, x, dy, block, operands.grad_weight, operands.grad_bias);
  }
  if (need_input) add_backward_data(g, c);
  if (weight_side && !unfold) add_backward_weights(g, c);
  // The output's gradient and the input in one storage (a backward seeded
  // with the input itself): in row-major order before either is read as
  // stored, as reading one row-major would move the other's bytes.
  if (operands.input.defined() && operands.input.impl()->storage == operands.grad_output.impl()->storage) {
    operands.input.raw_data();
  }
  // Both directions read the output's gradient, normally in the same
  // layout: it is reordered once, if it is not in that layout already.
  const memory dy_stored = onednn::stored(operands.grad_output, output_dims(g), Tag::nchw);
  memory dy = dy_stored;
  const auto grad_output_in = [&](const memory::desc& wanted) {
    if (dy.get_desc() != wanted) {
      dy = onednn::to_layout(dy_stored, wanted, Slot::Output, "conv2d backward: reordering the output's gradient");
    }
    return dy;
  };
  if (need_input) {
    const auto& [pd, primitive] = *c.backward_data;
    const memory w = onednn::to_layout(onednn::wrap(weight_dims(g), Tag::oihw, operands.weight), pd.weights_desc(),
                                       Slot::Weights, "conv2d backward-data: reordering the weight");
    const onednn::Result dx(operands.grad_input, input_dims(g), Tag::nchw, pd.diff_src_desc(), Slot::Input);
    onednn::execute("conv2d backward-data", primitive,
                    {{DNNL_ARG_DIFF_DST, grad_output_in(pd.diff_dst_desc())},
                     {DNNL_ARG_WEIGHTS, w},
                     {DNNL_ARG_DIFF_SRC, dx.memory()},
                     {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd.scratchpad_desc())}});
    dx.finish("conv2d backward-data: reordering the input's gradient");
  }
  if (weight_side && !unfold) {
    const auto& [pd, primitive] = *c.backward_weights;
    const memory x = onednn::to_layout(onednn::stored(operands.input, input_dims(g), Tag::nchw), pd.src_desc(),
                                       Slot::Input, "conv2d backward-filter: reordering the input");
    const memory dw_user = operands.grad_weight != nullptr
                               ? onednn::wrap(weight_dims(g), Tag::oihw, operands.grad_weight)
                               : memory(pd.diff_weights_desc(), onednn::engine(),
                                        onednn::staging(Slot::Weights, pd.diff_weights_desc().get_size()));
    const memory dw = onednn::for_output(dw_user, pd.diff_weights_desc(), Slot::Weights);
    onednn::Arguments arguments{{DNNL_ARG_SRC, x},
                                {DNNL_ARG_DIFF_DST, grad_output_in(pd.diff_dst_desc())},
                                {DNNL_ARG_DIFF_WEIGHTS, dw},
                                {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd.scratchpad_desc())}};
    if (with_bias) arguments.emplace(DNNL_ARG_DIFF_BIAS, onednn::wrap({g.filters}, Tag::x, operands.grad_bias));
    onednn::execute("conv2d backward-filter", primitive, arguments);
    onednn::copy_back(dw, dw_user, "conv2d backward-filter: reordering the weight's gradient");
  }
}

}  // namespace ddl::cpu_backend
