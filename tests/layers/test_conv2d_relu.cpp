// conv2d_relu (layers/conv2d.cpp, conv2d_cpu.cpp) and Sequential's fusion
// of a Conv2d with the ReLU after it: the same bits as relu(conv2d(...)),
// output and every gradient, on every CPU algorithm and in bf16, with sums
// of exactly zero and ties among them; the fused kernel really runs where
// it should and not where it must not (non-finite parameters); what a NaN
// sum becomes; and on a GPU, the same as the two apart.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/ddl.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/conv2d_kernels.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::same_bits;

namespace {

struct Case {
  Shape input, weight;
  layers::Conv2dOptions options;
  bool bias;
};

layers::Conv2dOptions options(std::int64_t stride, std::int64_t padding) {
  layers::Conv2dOptions o;
  o.stride = stride;
  o.padding = padding;
  return o;
}

// Uniform values in [-1, 1) with every fifth an exact zero, a third of
// those -0.0: sums of exactly zero (of either sign, where a whole window
// is zero) and ties at zero among the outputs.
Tensor with_zeros(const Shape& shape, Generator& generator) {
  std::vector<float> values = test::uniform_tensor(shape, generator).to_vector<float>();
  for (std::size_t i = 0; i < values.size(); i += 5) values[i] = i % 3 == 0 ? -0.0f : 0.0f;
  return from_vector(values, shape);
}

// The output, the input's, the weight's and (if any) the bias's
// gradients of conv2d_relu, or of relu(conv2d(...)).
std::vector<Tensor> run(bool fused, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& upstream,
                        const layers::Conv2dOptions& o) {
  const Tensor xs = x.clone().set_requires_grad(), ws = w.clone().set_requires_grad();
  const Tensor bs = b.defined() ? b.clone().set_requires_grad() : Tensor();
  const Tensor y = fused ? layers::conv2d_relu(xs, ws, bs, o) : relu(layers::conv2d(xs, ws, bs, o));
  y.backward(upstream);
  std::vector<Tensor> results{y, xs.grad(), ws.grad()};
  if (b.defined()) results.push_back(bs.grad());
  return results;
}

// How many spans of each name a recording holds.
std::map<std::string, int> span_counts(const timeline::Recording& recording) {
  std::map<std::string, int> counts;
  for (const timeline::Event& event : recording.events) ++counts[event.name];
  return counts;
}

// Puts the CPU convolution's settings back however the case ends.
struct SettingsGuard {
  config::CpuConvolution algorithm = config::cpu_convolution();
  config::CpuPrecision precision = config::cpu_precision();
  bool fusion = config::op_fusion();
  ~SettingsGuard() {
    set_cpu_convolution(algorithm);
    set_cpu_precision(precision);
    set_op_fusion(fusion);
  }
};

layers::Conv2dGeometry geometry_of(const Case& t, const Shape& output) {
  layers::Conv2dGeometry g;
  g.batch = t.input[0];
  g.channels = t.input[1];
  g.height = t.input[2];
  g.width = t.input[3];
  g.filters = t.weight[0];
  g.kernel_h = t.weight[2];
  g.kernel_w = t.weight[3];
  g.stride = t.options.stride;
  g.padding = t.options.padding;
  g.out_height = output[2];
  g.out_width = output[3];
  return g;
}

}  // namespace

TEST_CASE("conv2d_relu gives relu(conv2d)'s bits, output and every gradient, on every CPU algorithm") {
  const std::vector<Case> cases{
      {{3, 16, 12, 11}, {16, 16, 3, 3}, options(1, 1), true},   // channels in oneDNN's blocks
      {{2, 32, 14, 13}, {32, 32, 3, 3}, options(1, 1), false},  // Winograd's shape
      {{5, 3, 9, 10}, {5, 3, 3, 3}, options(2, 1), true},       // few channels, strided
      {{4, 1, 13, 13}, {8, 1, 3, 3}, options(1, 0), true},      // one input channel: its weight's side unfolded
      {{2, 6, 7, 8}, {20, 6, 1, 1}, options(1, 0), false},      // 1x1
  };
  std::vector<std::pair<config::CpuConvolution, config::CpuPrecision>> settings{
      {config::CpuConvolution::Auto, config::CpuPrecision::Float32},
      {config::CpuConvolution::Direct, config::CpuPrecision::Float32},
      {config::CpuConvolution::Winograd, config::CpuPrecision::Float32},
      {config::CpuConvolution::DdlWinograd, config::CpuPrecision::Float32}};
  if (config::cpu_has_bf16()) settings.emplace_back(config::CpuConvolution::Auto, config::CpuPrecision::BFloat16);
  const SettingsGuard settings_before;
  Generator generator(97);
  int own_winograd = 0;
  for (const auto& [algorithm, precision] : settings) {
    set_cpu_convolution(algorithm);
    set_cpu_precision(precision);
    for (const Case& t : cases) {
      const std::string conv_case = fmt::format(
          "x {}, w {}, stride {}, padding {}, bias {}, algorithm {}, bf16 {}", t.input, t.weight, t.options.stride,
          t.options.padding, t.bias, static_cast<int>(algorithm), precision == config::CpuPrecision::BFloat16);
      CAPTURE(conv_case);
      Tensor x = with_zeros(t.input, generator);
      // The first image all zeros: without a bias its sums are exactly 0
      // (or -0), the case where max(sum, 0) and relu() could differ in sign.
      std::vector<float> values = x.to_vector<float>();
      std::fill(values.begin(), values.begin() + t.input.numel() / t.input[0], 0.0f);
      x = from_vector(values, t.input);
      const Tensor w = with_zeros(t.weight, generator);
      const Tensor b = t.bias ? test::uniform_tensor({t.weight[0]}, generator) : Tensor();
      const Shape out = layers::conv2d(x, w, b, t.options).shape();
      const Tensor upstream = test::uniform_tensor(out, generator);
      const std::vector<Tensor> fused = run(true, x, w, b, upstream, t.options);
      const std::vector<Tensor> apart = run(false, x, w, b, upstream, t.options);
      for (std::size_t i = 0; i < fused.size(); ++i) {
        CAPTURE(i);
        CHECK(same_bits(fused[i], apart[i]));
      }
      // The convolution's kernel applied the ReLU itself (the case this
      // tests), oneDNN's or ddl's Winograd.
      const layers::Conv2dGeometry g = geometry_of(t, out);
      Tensor output = empty_float(out, cpu());
      CHECK(cpu_backend::conv2d_forward(g, x, w.data<float>(), t.bias ? b.data<float>() : nullptr, output, true));
      CHECK(same_bits(output, fused[0]));
      own_winograd += cpu_backend::conv2d_implementation(g) == "ddl_winograd_4x3" ? 1 : 0;
    }
  }
  CHECK(own_winograd >= 3);  // under ddl-winograd at least: both kinds of kernel ran
}

TEST_CASE("conv2d_relu makes a NaN sum 0 where oneDNN fuses, and runs unfused where the weight or bias is not finite") {
  Generator generator(98);
  // More outputs than weights: fused_relu checks the weights only then.
  const Case t{{4, 16, 10, 9}, {16, 16, 3, 3}, options(1, 1), true};
  const Tensor w = test::uniform_tensor(t.weight, generator), b = test::uniform_tensor({16}, generator);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const SettingsGuard settings_before;
  set_cpu_convolution(config::CpuConvolution::Direct);  // oneDNN's kernel on every CPU

  // A NaN pixel in the input: the sums of the windows that hold it are NaN.
  std::vector<float> values = test::uniform_tensor(t.input, generator).to_vector<float>();
  values[3 * 9 + 4] = nan;  // image 0, channel 0, row 3, column 4
  const Tensor x = from_vector(values, t.input);
  const std::vector<float> apart = relu(layers::conv2d(x, w, b, t.options)).to_vector<float>();
  const std::vector<float> fused = layers::conv2d_relu(x, w, b, t.options).to_vector<float>();
  int nan_sums = 0;
  for (std::size_t i = 0; i < apart.size(); ++i) {
    if (std::isnan(apart[i])) {
      ++nan_sums;
      CHECK(fused[i] == 0.0f);
      CHECK_FALSE(std::signbit(fused[i]));
    } else {
      CHECK(fused[i] == apart[i]);
    }
  }
  CHECK(nan_sums == 16 * 9);  // every filter, the 3x3 outputs whose window holds the pixel

  // A NaN or an infinity in the weight or the bias: unfused, so what is not
  // finite reaches the output as relu() leaves it, and the gradients are
  // relu(conv2d)'s. 16 filters and 5 (channels not in oneDNN's blocks).
  for (const Case& poisoned_case : {t, Case{{3, 7, 9, 8}, {5, 7, 3, 3}, options(2, 1), true}}) {
    const Tensor clean = test::uniform_tensor(poisoned_case.input, generator);
    const Tensor w1 = test::uniform_tensor(poisoned_case.weight, generator);
    const Tensor b1 = test::uniform_tensor({poisoned_case.weight[0]}, generator);
    for (const float poison : {nan, std::numeric_limits<float>::infinity()}) {
      for (const bool in_bias : {false, true}) {
        CAPTURE(poisoned_case.weight);
        CAPTURE(poison);
        CAPTURE(in_bias);
        std::vector<float> poisoned = (in_bias ? b1 : w1).to_vector<float>();
        poisoned[3] = in_bias ? poison : -poison;
        const Tensor w2 = in_bias ? w1 : from_vector(poisoned, poisoned_case.weight);
        const Tensor b2 = in_bias ? from_vector(poisoned, b1.shape()) : b1;
        const Tensor out_shape = layers::conv2d(clean, w2, b2, poisoned_case.options);
        const Tensor upstream = test::uniform_tensor(out_shape.shape(), generator);
        const std::vector<Tensor> fused_results = run(true, clean, w2, b2, upstream, poisoned_case.options);
        const std::vector<Tensor> apart_results = run(false, clean, w2, b2, upstream, poisoned_case.options);
        for (std::size_t i = 0; i < fused_results.size(); ++i) {
          CAPTURE(i);
          CHECK(same_bits(fused_results[i], apart_results[i]));
        }
        Tensor output = empty_float(out_shape.shape(), cpu());
        CHECK_FALSE(cpu_backend::conv2d_forward(geometry_of(poisoned_case, out_shape.shape()), clean, w2.data<float>(),
                                                b2.data<float>(), output, true));
        const std::vector<float> out = fused_results[0].to_vector<float>();
        CHECK(std::any_of(out.begin(), out.end(), [](float v) { return !std::isfinite(v); }));
      }
    }
  }

  // ddl's Winograd kernels fuse relu()'s own function: NaN stays NaN.
  set_cpu_convolution(config::CpuConvolution::DdlWinograd);
  const Tensor fused_winograd = layers::conv2d_relu(x, w, b, t.options);
  CHECK(same_bits(fused_winograd, relu(layers::conv2d(x, w, b, t.options))));
  const std::vector<float> kept = fused_winograd.to_vector<float>();
  // (At least the 16 x 9 sums whose windows hold the pixel: the transforms
  // spread a NaN over every output of the tiles whose patches hold it.)
  CHECK(std::count_if(kept.begin(), kept.end(), [](float v) { return std::isnan(v); }) >= 16 * 9);
  Tensor output = empty_float(fused_winograd.shape(), cpu());
  CHECK(cpu_backend::conv2d_forward(geometry_of(t, output.shape()), x, w.data<float>(), b.data<float>(), output, true));
}

TEST_CASE("Sequential runs a Conv2d followed by a ReLU fused, to the same bits as apart, unless fusion is off") {
  const auto build = [] {
    Generator generator(99);
    auto model = std::make_shared<layers::Sequential>();
    model->add(std::make_shared<layers::Conv2d>(3, 16, layers::Conv2dOptions{.kernel_size = 3}, &generator))
        .emplace<layers::ReLU>()
        .add(
            std::make_shared<layers::Conv2d>(16, 16, layers::Conv2dOptions{.kernel_size = 3, .padding = 1}, &generator))
        .emplace<layers::ReLU>()
        .emplace<layers::MaxPool2d>(layers::Pool2dOptions{.kernel_size = 2})
        .emplace<layers::Flatten>()
        .add(std::make_shared<layers::Dense>(16 * 4 * 5, 7, true, &generator));
    return model;
  };
  Generator generator(100);
  const Tensor x = with_zeros({6, 3, 10, 12}, generator);
  const Tensor labels = from_vector(std::vector<std::int32_t>{0, 3, 6, 1, 1, 5}, {6});
  // One training step's output, loss and gradients, and each forward
  // span's name (a span per layer, or per fused pair).
  const SettingsGuard settings_before;
  const auto step = [&](bool fusion) {
    set_op_fusion(fusion);
    const auto model = build();
    timeline::start({.per_layer = true});
    const Tensor y = model->forward(x);
    const Tensor loss = layers::cross_entropy(y, labels);
    loss.backward();
    const timeline::Recording recording = timeline::stop();
    std::vector<Tensor> results{y, loss};
    for (const Tensor& p : model->parameters()) results.push_back(p.grad());
    return std::pair{results, span_counts(recording)};
  };
  const auto [fused, fused_spans] = step(true);
  const auto [apart, apart_spans] = step(false);
  REQUIRE(fused.size() == apart.size());
  for (std::size_t i = 0; i < fused.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(fused[i], apart[i]));
  }
  CHECK(fused_spans.contains("0+1 Conv2d+ReLU"));
  CHECK(fused_spans.contains("Conv2dReluBackward"));
  CHECK_FALSE(fused_spans.contains("1 ReLU"));
  // The second ReLU is swapped with the max pooling after it instead.
  CHECK_FALSE(fused_spans.contains("2+3 Conv2d+ReLU"));
  CHECK(fused_spans.contains("2 Conv2d"));
  CHECK(fused_spans.contains("3 ReLU"));
  CHECK(fused_spans.contains("4 MaxPool2d"));
  CHECK(apart_spans.contains("0 Conv2d"));
  CHECK(apart_spans.contains("1 ReLU"));
  CHECK_FALSE(apart_spans.contains("Conv2dReluBackward"));
}

TEST_CASE("Sequential runs a ReLU and the max pooling after it swapped, to the same bits, NaNs and ties included") {
  // Windows that tile, overlap, are padded, run past the edge (ceil_mode),
  // and one of stride 1, which stays in order. The input a fifth zeros,
  // one image all negative (windows whose maximum is not positive), and
  // NaNs; a Dense layer after, so that parameters' gradients count too.
  const std::vector<layers::Pool2dOptions> poolings{{.kernel_size = 2},
                                                    {.kernel_size = 3, .stride = 2},
                                                    {.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true},
                                                    {.kernel_size = 2, .stride = 1}};
  const SettingsGuard settings_before;
  for (const layers::Pool2dOptions& pooling : poolings) {
    CAPTURE(pooling.kernel_size);
    CAPTURE(pooling.stride);
    CAPTURE(pooling.padding);
    const Shape pooled{3, 4, layers::pool2d_output_extent(13, pooling), layers::pool2d_output_extent(12, pooling)};
    // One step's output and gradients, and the order its forward spans ended in.
    const auto step = [&](bool fusion) {
      set_op_fusion(fusion);
      Generator generator(103);
      auto model = std::make_shared<layers::Sequential>();
      model->emplace<layers::ReLU>().emplace<layers::MaxPool2d>(pooling).emplace<layers::Flatten>().add(
          std::make_shared<layers::Dense>(pooled.numel() / 3, 5, true, &generator));
      std::vector<float> values = with_zeros({3, 4, 13, 12}, generator).to_vector<float>();
      for (std::size_t i = 0; i < 4 * 13 * 12; ++i) values[i] = -std::abs(values[i]) - 0.5f;  // image 0
      values[4 * 13 * 12 + 5 * 12 + 6] = std::numeric_limits<float>::quiet_NaN();             // image 1
      values[4 * 13 * 12 + 2 * 12 + 9] = std::numeric_limits<float>::quiet_NaN();
      const Tensor x = from_vector(values, {3, 4, 13, 12}).set_requires_grad();
      timeline::start({.per_layer = true});
      const Tensor pooled_values = (*model)[1].forward((*model)[0].forward(x.detach()));
      const Tensor y = model->forward(x);
      y.backward(test::uniform_tensor(y.shape(), generator));
      const timeline::Recording recording = timeline::stop();
      std::vector<Tensor> results{pooled_values, y, x.grad()};
      for (const Tensor& p : model->parameters()) results.push_back(p.grad());
      std::vector<std::string> order;
      for (const timeline::Event& event : recording.events) {
        if (event.name == "0 ReLU" || event.name == "1 MaxPool2d") order.push_back(event.name);
      }
      return std::pair{results, order};
    };
    const auto [swapped, swapped_order] = step(true);
    const auto [in_order, in_order_order] = step(false);
    for (std::size_t i = 0; i < swapped.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bits(swapped[i], in_order[i]));
    }
    const std::vector<float> out = swapped[0].to_vector<float>();  // relu then max pooling, by hand
    const auto first_image_end = out.begin() + static_cast<std::ptrdiff_t>(out.size() / 3);
    CHECK(std::all_of(out.begin(), first_image_end, [](float v) { return v == 0.0f && !std::signbit(v); }));
    CHECK(std::any_of(first_image_end, out.end(), [](float v) { return std::isnan(v); }));
    // Spans end inner first: the swapped pair's ReLU ran last.
    const std::vector<std::string> expected = pooling.window_stride() > 1
                                                  ? std::vector<std::string>{"1 MaxPool2d", "0 ReLU"}
                                                  : std::vector<std::string>{"0 ReLU", "1 MaxPool2d"};
    CHECK(swapped_order == expected);
    CHECK(in_order_order == std::vector<std::string>{"0 ReLU", "1 MaxPool2d"});
  }
}

TEST_CASE("Sequential runs a Conv2d and its ReLU apart where a recomputed segment splits them") {
  Generator generator(102);
  auto model = std::make_shared<layers::Sequential>();
  model->add(std::make_shared<layers::Conv2d>(3, 8, layers::Conv2dOptions{.kernel_size = 3}, &generator))
      .emplace<layers::ReLU>()
      .add(std::make_shared<layers::Conv2d>(8, 8, layers::Conv2dOptions{.kernel_size = 3}, &generator))
      .emplace<layers::ReLU>();
  model->recompute({{0, 0}});  // the first Conv2d alone; the rest after
  const SettingsGuard settings_before;
  set_op_fusion(true);
  const Tensor x = test::uniform_tensor({2, 3, 9, 9}, generator);
  timeline::start({.per_layer = true});
  const Tensor y = model->forward(x);
  sum(y).backward();
  const timeline::Recording recording = timeline::stop();
  const std::map<std::string, int> spans = span_counts(recording);
  CHECK(spans.contains("0 Conv2d"));
  CHECK(spans.contains("1 ReLU"));
  CHECK(spans.contains("2+3 Conv2d+ReLU"));
  CHECK(model->fusable_with_next(0));  // the pair itself is fusable: the segment split it
  CHECK_FALSE(model->fusable_with_next(1));
}

TEST_CASE("conv2d_relu on every CUDA device gives relu(conv2d)'s bits there" * doctest::test_suite("cuda")) {
  if (!cuda_available()) return test::skip("no CUDA device");
  // Algorithms whose bits repeat run to run: the two runs must agree.
  const config::CudaConvolution algorithms_before = config::cuda_convolution();
  set_cuda_convolution(config::CudaConvolution::Deterministic);
  Generator generator(101);
  const Case t{{3, 16, 12, 11}, {16, 16, 3, 3}, options(1, 1), true};
  for (int index = 0; index < device_count(DeviceType::CUDA); ++index) {
    CAPTURE(index);
    const Device gpu(DeviceType::CUDA, index);
    const Tensor x = with_zeros(t.input, generator).to(gpu), w = with_zeros(t.weight, generator).to(gpu);
    const Tensor b = test::uniform_tensor({16}, generator).to(gpu);
    const Tensor upstream = test::uniform_tensor({3, 16, 12, 11}, generator).to(gpu);
    const std::vector<Tensor> fused = run(true, x, w, b, upstream, t.options);
    const std::vector<Tensor> apart = run(false, x, w, b, upstream, t.options);
    for (std::size_t i = 0; i < fused.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bits(fused[i].to(cpu()), apart[i].to(cpu())));
    }
  }
  set_cuda_convolution(algorithms_before);
}
