// Conv2d (layers/conv2d.cpp, conv2d_cpu.cpp): values against a direct
// seven-loop convolution, gradients by finite differences, the same bits for
// any thread count, the layer's parameters, and the errors for inputs that
// do not fit.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <ddl/core/cpu/onednn.hpp>
#include <ddl/ddl.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/conv2d_kernels.hpp>
#include <ddl/layers/conv2d_winograd.hpp>
#include <ddl/layers/pool2d.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support/gradcheck.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;
using ddl::test::within_dot_product_bound;

namespace {

struct ConvCase {
  std::int64_t n, c, h, w, k, kh, kw;
  layers::Conv2dOptions options;
};

// "x [2, 3, 7, 7], w [5, 3, 3, 3], stride 1, padding 0, dilation 1", for CAPTURE.
std::string describe(const ConvCase& t) {
  return fmt::format("x [{}, {}, {}, {}], w [{}, {}, {}, {}], stride {}, padding {}, dilation {}", t.n, t.c, t.h, t.w,
                     t.k, t.c, t.kh, t.kw, t.options.stride, t.options.padding, t.options.dilation);
}

// The convolution by definition, in double, one output element at a time:
// y[n, k, oh, ow] = b[k] + sum over c, i, j of
//   w[k, c, i, j] * x[n, c, oh s - p + i d, ow s - p + j d]   (0 outside x).
std::vector<float> reference_conv2d(const ConvCase& t, const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& b) {
  const std::int64_t s = t.options.stride, p = t.options.padding, d = t.options.dilation;
  const std::int64_t oh_count = (t.h + 2 * p - d * (t.kh - 1) - 1) / s + 1;
  const std::int64_t ow_count = (t.w + 2 * p - d * (t.kw - 1) - 1) / s + 1;
  std::vector<float> y(static_cast<std::size_t>(t.n * t.k * oh_count * ow_count));
  const auto at = [](const std::vector<float>& v, std::int64_t i) {
    return static_cast<double>(v[static_cast<std::size_t>(i)]);
  };
  std::size_t out = 0;
  for (std::int64_t n = 0; n < t.n; ++n) {
    for (std::int64_t k = 0; k < t.k; ++k) {
      for (std::int64_t oh = 0; oh < oh_count; ++oh) {
        for (std::int64_t ow = 0; ow < ow_count; ++ow) {
          double total = b.empty() ? 0.0 : at(b, k);
          for (std::int64_t c = 0; c < t.c; ++c) {
            for (std::int64_t i = 0; i < t.kh; ++i) {
              for (std::int64_t j = 0; j < t.kw; ++j) {
                const std::int64_t ih = oh * s - p + i * d, iw = ow * s - p + j * d;
                if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
                total += at(w, ((k * t.c + c) * t.kh + i) * t.kw + j) * at(x, ((n * t.c + c) * t.h + ih) * t.w + iw);
              }
            }
          }
          y[out++] = static_cast<float>(total);
        }
      }
    }
  }
  return y;
}

layers::Conv2dOptions options(std::int64_t stride, std::int64_t padding, std::int64_t dilation) {
  layers::Conv2dOptions o;
  o.stride = stride;
  o.padding = padding;
  o.dilation = dilation;
  return o;
}

// Float32 dot products of up to C kh kw = 125 terms in [-1, 1) against the
// double loop: rounding errors of random sign add like a random walk,
// sqrt(125) * 2^-24 * |terms| ~ 1e-5 at the very worst of these cases.
constexpr double kConvTolerance = 3e-5;

}  // namespace

TEST_CASE("conv2d matches a direct seven-loop convolution on awkward shapes") {
  const std::vector<ConvCase> cases{
      {1, 3, 7, 5, 4, 3, 3, options(1, 0, 1)},    // batch 1, non-square input
      {7, 5, 9, 11, 3, 3, 3, options(2, 1, 1)},   // batch 7, stride 2, padding 1
      {2, 3, 10, 8, 5, 3, 3, options(1, 1, 2)},   // dilation 2
      {3, 1, 13, 13, 6, 5, 5, options(2, 2, 1)},  // one input channel, 5x5 kernel
      {2, 4, 6, 7, 3, 1, 1, options(1, 0, 1)},    // 1x1 kernel: col is the input itself
      {2, 4, 7, 6, 3, 1, 1, options(2, 0, 1)},    // 1x1 kernel with stride
      {1, 2, 5, 9, 3, 2, 4, options(3, 2, 2)},    // non-square kernel, stride 3
      {2, 5, 3, 3, 2, 3, 3, options(1, 0, 1)},    // a 1x1 output
      {1, 2, 4, 4, 3, 3, 3, options(1, 3, 1)},    // padding wider than the kernel
      {2, 32, 6, 5, 7, 3, 3, options(1, 1, 1)},   // a deeper GEMM (288 terms)
  };
  Generator generator(21);
  for (const ConvCase& t : cases) {
    for (const bool with_bias : {true, false}) {
      const std::string conv_case = describe(t);
      CAPTURE(conv_case);
      CAPTURE(with_bias);
      const Tensor x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator);
      const Tensor w = test::uniform_tensor({t.k, t.c, t.kh, t.kw}, generator);
      const Tensor b = with_bias ? test::uniform_tensor({t.k}, generator) : Tensor();
      const Tensor y = layers::conv2d(x, w, b, t.options);
      const std::vector<float> expected = reference_conv2d(t, x.to_vector<float>(), w.to_vector<float>(),
                                                           with_bias ? b.to_vector<float>() : std::vector<float>{});
      const double tolerance = t.c * t.kh * t.kw > 125 ? 2 * kConvTolerance : kConvTolerance;
      CHECK(all_close(y, expected, tolerance, tolerance));
      const std::int64_t s = t.options.stride, p = t.options.padding, d = t.options.dilation;
      CHECK(y.shape() ==
            Shape{t.n, t.k, (t.h + 2 * p - d * (t.kh - 1) - 1) / s + 1, (t.w + 2 * p - d * (t.kw - 1) - 1) / s + 1});
    }
  }
}

TEST_CASE("conv2d gradients of input, weight and bias match finite differences") {
  std::mt19937 rng(31);
  Generator generator(31);
  const auto pick = [&](std::vector<std::int64_t> choices) {
    return choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(rng)];
  };
  int checked = 0;
  while (checked < 8) {
    ConvCase t{pick({1, 2, 3}), pick({1, 2, 3}), pick({3, 4, 5, 7}), pick({3, 5, 6}),
               pick({1, 2, 3}), pick({1, 2, 3}), pick({1, 3}),       options(pick({1, 2}), pick({0, 1}), pick({1, 2}))};
    const std::int64_t d = t.options.dilation, p = t.options.padding;
    if (t.h + 2 * p < d * (t.kh - 1) + 1 || t.w + 2 * p < d * (t.kw - 1) + 1) continue;  // kernel does not fit
    ++checked;
    const std::string conv_case = describe(t);
    CAPTURE(conv_case);
    const Tensor x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator);
    const Tensor w = test::uniform_tensor({t.k, t.c, t.kh, t.kw}, generator);
    const Tensor b = test::uniform_tensor({t.k}, generator);
    const layers::Conv2dOptions o = t.options;
    CHECK(gradcheck([o](const std::vector<Tensor>& v) { return layers::conv2d(v[0], v[1], v[2], o); }, {x, w, b}));
    CHECK(gradcheck([o](const std::vector<Tensor>& v) { return layers::conv2d(v[0], v[1], Tensor(), o); }, {x, w}));
  }
}

TEST_CASE("conv2d backward computes only the gradients that are needed, and the same ones") {
  Generator generator(41);
  const layers::Conv2dOptions o = options(2, 1, 1);
  const Tensor x = test::uniform_tensor({3, 2, 7, 6}, generator);
  const Tensor w = test::uniform_tensor({4, 2, 3, 3}, generator);
  const Tensor b = test::uniform_tensor({4}, generator);
  const Tensor g = test::uniform_tensor({3, 4, 4, 3}, generator);

  const Tensor x_all = x.clone().set_requires_grad(), w_all = w.clone().set_requires_grad();
  const Tensor b_all = b.clone().set_requires_grad();
  layers::conv2d(x_all, w_all, b_all, o).backward(g);

  const Tensor x_only = x.clone().set_requires_grad();
  layers::conv2d(x_only, w, b, o).backward(g);
  CHECK(all_close(x_only.grad(), x_all.grad(), 0, 0));

  const Tensor w_only = w.clone().set_requires_grad();
  layers::conv2d(x, w_only, b, o).backward(g);
  CHECK(all_close(w_only.grad(), w_all.grad(), 0, 0));

  const Tensor b_only = b.clone().set_requires_grad();
  const Tensor y = layers::conv2d(x, w, b_only, o);
  y.backward(g);
  CHECK(all_close(b_only.grad(), b_all.grad(), 0, 0));
  CHECK(!w.grad().defined());

  NoGradGuard no_grad;
  CHECK(!layers::conv2d(x_all, w_all, b_all, o).requires_grad());
}

TEST_CASE("conv2d gives the same bits with one thread and with two") {
  Generator generator(51);
  const layers::Conv2dOptions o = options(1, 1, 1);
  // 19 images: 16 weight-gradient chunks of uneven size, split 8/8 between
  // two threads; the bias gradient is large enough to run on both threads.
  const Tensor x = test::uniform_tensor({19, 3, 16, 15}, generator);
  const Tensor w = test::uniform_tensor({8, 3, 3, 3}, generator);
  const Tensor b = test::uniform_tensor({8}, generator);
  const Tensor g = test::uniform_tensor({19, 8, 16, 15}, generator);
  const auto run = [&](int threads) {
    set_num_threads(threads);
    const Tensor xs = x.clone().set_requires_grad(), ws = w.clone().set_requires_grad();
    const Tensor bs = b.clone().set_requires_grad();
    const Tensor y = layers::conv2d(xs, ws, bs, o);
    y.backward(g);
    return std::vector{y, xs.grad(), ws.grad(), bs.grad()};
  };
  const test::NumThreadsGuard threads_before;
  const std::vector<Tensor> one = run(1), two = run(2);
  for (std::size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(all_close(two[i], one[i], 0, 0));
  }
}

TEST_CASE("two convolutions give the same bits whether the activation between them stays in oneDNN's layout") {
  // conv -> ReLU -> conv: the first convolution leaves its output in its
  // own layout, the ReLU keeps it, the second reads it as it is, and its
  // input's gradient comes back in that layout through the ReLU's
  // gradient (core/memory_form.hpp). Against the same with the activation
  // and its gradient put in NCHW between the two. With 3 input channels
  // the first convolution's weight side is unfolded
  // (conv2d_unfold_cpu.cpp) and reads its output's gradient in blocks.
  const config::CpuConvolution before = config::cpu_convolution();
  for (const auto& run : {std::pair{config::CpuConvolution::Direct, 16}, std::pair{config::CpuConvolution::Auto, 16},
                          std::pair{config::CpuConvolution::Auto, 3}}) {
    // Not structured bindings: clang 14's lambdas (CAPTURE's) cannot take them.
    const config::CpuConvolution algorithm = run.first;
    const int channels = run.second;
    CAPTURE(static_cast<int>(algorithm));
    CAPTURE(channels);
    set_cpu_convolution(algorithm);
    Generator generator(61);
    const Tensor x = test::uniform_tensor({5, channels, 12, 11}, generator);
    const Tensor w1 = test::uniform_tensor({32, channels, 3, 3}, generator), b1 = test::uniform_tensor({32}, generator);
    const Tensor w2 = test::uniform_tensor({16, 32, 3, 3}, generator), b2 = test::uniform_tensor({16}, generator);
    const Tensor g = test::uniform_tensor({5, 16, 10, 9}, generator);
    const auto parameters = [&] {
      return std::vector{x.clone().set_requires_grad(), w1.clone().set_requires_grad(), b1.clone().set_requires_grad(),
                         w2.clone().set_requires_grad(), b2.clone().set_requires_grad()};
    };
    const auto results = [](const Tensor& y, const std::vector<Tensor>& p) {
      std::vector<Tensor> all{y};
      for (const Tensor& t : p) all.push_back(t.grad());
      return all;
    };
    const layers::Conv2dOptions same = options(1, 1, 1), valid = options(1, 0, 1);

    const std::vector<Tensor> p = parameters();
    const Tensor h = relu(layers::conv2d(p[0], p[1], p[2], same));
    CHECK(h.stored_form() != nullptr);  // a layout of oneDNN's: the case this tests
    const Tensor y = layers::conv2d(h, p[3], p[4], valid);
    y.backward(g);
    // Still in that layout: the second convolution read it as it is, both
    // ways (reading it in NCHW would have put it in NCHW for good), and so
    // does max pooling, whose output keeps the layout's channel blocks.
    CHECK(h.stored_form() != nullptr);
    CHECK(cpu_backend::onednn::channel_block(layers::max_pool2d(h, {2, 2, 0})) > 0);
    CHECK(h.stored_form() != nullptr);
    const std::vector<Tensor> kept = results(y, p);

    // In two halves, the activation and its gradient read in between.
    const std::vector<Tensor> q = parameters();
    const Tensor h1 = relu(layers::conv2d(q[0], q[1], q[2], same));
    const Tensor h2 = from_vector(h1.to_vector<float>(), h1.shape()).set_requires_grad();
    const Tensor y2 = layers::conv2d(h2, q[3], q[4], valid);
    y2.backward(g);
    h1.backward(from_vector(h2.grad().to_vector<float>(), h2.shape()));
    const std::vector<Tensor> plain = results(y2, q);
    for (std::size_t i = 0; i < kept.size(); ++i) {
      CAPTURE(i);
      CHECK(all_close(kept[i], plain[i], 0, 0));
    }
  }
  set_cpu_convolution(before);
}

TEST_CASE("conv2d of an empty batch is empty and its weight gradient zero") {
  const Tensor x = zeros({0, 2, 5, 5});
  const Tensor w = ones({3, 2, 3, 3}).set_requires_grad();
  const Tensor b = ones({3}).set_requires_grad();
  const Tensor y = layers::conv2d(x, w, b, options(1, 1, 1));
  CHECK(y.shape() == Shape{0, 3, 5, 5});
  sum(y).backward();
  CHECK(all_close(w.grad(), zeros({3, 2, 3, 3}), 0, 0));
  CHECK(all_close(b.grad(), zeros({3}), 0, 0));
}

TEST_CASE("conv2d layer (Conv2d) has out*in*k*k + out parameters") {
  CHECK(layers::Conv2d(1, 32).parameter_count() == 320);
  CHECK(layers::Conv2d(32, 64).parameter_count() == 18496);
  layers::Conv2dOptions no_bias;
  no_bias.bias = false;
  no_bias.kernel_size = 5;
  const layers::Conv2d conv(3, 6, no_bias);
  CHECK(conv.parameter_count() == 6 * 3 * 5 * 5);
  CHECK(!conv.bias().defined());
  CHECK(conv.weight().shape() == Shape{6, 3, 5, 5});
}

TEST_CASE("conv2d layer (Conv2d) starts from Glorot-uniform weights and zero bias") {
  Generator generator(61);
  const layers::Conv2d conv(32, 64, {}, &generator);
  const float limit = std::sqrt(6.0f / (32.0f * 9.0f + 64.0f * 9.0f));
  const auto w = conv.weight().to_vector<float>();
  const auto [lo, hi] = std::minmax_element(w.begin(), w.end());
  CHECK(*lo >= -limit);
  CHECK(*hi <= limit);
  CHECK(*hi > 0.99f * limit);  // 18k draws reach the edge of the range
  CHECK(*lo < -0.99f * limit);
  CHECK(all_close(conv.bias(), zeros({64}), 0, 0));
}

TEST_CASE("conv2d layer (Conv2d) forward is conv2d with its parameters and options, and describes them") {
  Generator generator(71);
  layers::Conv2dOptions o = options(2, 1, 1);
  layers::Conv2d conv(3, 4, o, &generator);
  const Tensor x = test::uniform_tensor({2, 3, 9, 8}, generator);
  CHECK(all_close(conv(x), layers::conv2d(x, conv.weight(), conv.bias(), o), 0, 0));
  CHECK(conv.type_name() == "Conv2d");
  CHECK(conv.describe() == "Conv2d(3, 4, kernel_size=3, stride=2, padding=1, dilation=1)");
  o.bias = false;
  CHECK(layers::Conv2d(3, 4, o).describe() ==
        "Conv2d(3, 4, kernel_size=3, stride=2, padding=1, dilation=1, bias=false)");
}

TEST_CASE("conv2d layer (Conv2d) takes a rectangular kernel as height by width") {
  Generator generator(72);
  layers::Conv2d conv(3, 4, {.kernel_size = {1, 5}, .padding = 1}, &generator);
  CHECK(conv.weight().shape() == Shape{4, 3, 1, 5});
  CHECK(conv.parameter_count() == 4 * 3 * 1 * 5 + 4);
  CHECK(conv.describe() == "Conv2d(3, 4, kernel_size=(1, 5), stride=1, padding=1, dilation=1)");
  const Tensor x = test::uniform_tensor({2, 3, 6, 7}, generator);
  const Tensor y = conv(x);
  CHECK(y.shape() == Shape{2, 4, 8, 5});  // (6 + 2 - 1) + 1 rows, (7 + 2 - 5) + 1 columns
  CHECK(all_close(y, layers::conv2d(x, conv.weight(), conv.bias(), conv.options()), 0, 0));
  CHECK(throws_error_mentioning(
      [] {
        layers::Conv2d(3, 4, {.kernel_size = {3, 0}});
      },
      {"Conv2d", "kernel_size", "3x0"}));
}

TEST_CASE("conv2d rejects an input that is not 4-D") {
  const Tensor w = zeros({4, 3, 3, 3});
  CHECK(throws_error_mentioning([&] { layers::conv2d(zeros({3, 8, 8}), w, Tensor()); }, {"conv2d", "[3, 8, 8]"}));
  CHECK(throws_error_mentioning(
      [&] {
        layers::conv2d(zeros({1, 1, 3, 8, 8}), w, Tensor());
      },
      {"conv2d", "[1, 1, 3, 8, 8]"}));
}

TEST_CASE("conv2d rejects an input whose channel count differs from the weight's") {
  CHECK(throws_error_mentioning(
      [&] {
        layers::conv2d(zeros({2, 5, 8, 8}), zeros({4, 3, 3, 3}), Tensor());
      },
      {"conv2d", "[2, 5, 8, 8]", "[4, 3, 3, 3]"}));
}

TEST_CASE("conv2d rejects an input smaller than the dilated kernel after padding") {
  const Tensor w = zeros({4, 3, 3, 3});
  CHECK(throws_error_mentioning(
      [&] {
        layers::conv2d(zeros({2, 3, 2, 8}), w, Tensor());
      },
      {"conv2d", "[2, 3, 2, 8]", "[4, 3, 3, 3]"}));
  // 4x4 fits a 3x3 kernel, but not one dilated by 2 (5x5); padding 1 makes it fit.
  CHECK(throws_error_mentioning(
      [&] {
        layers::conv2d(zeros({1, 3, 4, 4}), w, Tensor(), options(1, 0, 2));
      },
      {"conv2d", "[1, 3, 4, 4]", "[4, 3, 3, 3]", "5x5"}));
  CHECK(layers::conv2d(zeros({1, 3, 4, 4}), w, Tensor(), options(1, 1, 2)).shape() == Shape{1, 4, 2, 2});
}

TEST_CASE("conv2d rejects a non-positive stride or dilation and a negative padding") {
  const Tensor x = zeros({2, 3, 8, 8}), w = zeros({4, 3, 3, 3});
  for (const std::int64_t bad : {0, -1}) {
    CHECK(throws_error_mentioning([&] { layers::conv2d(x, w, Tensor(), options(bad, 0, 1)); },
                                  {"conv2d", "stride", "[2, 3, 8, 8]", "[4, 3, 3, 3]"}));
    CHECK(throws_error_mentioning([&] { layers::conv2d(x, w, Tensor(), options(1, 0, bad)); },
                                  {"conv2d", "dilation", "[2, 3, 8, 8]", "[4, 3, 3, 3]"}));
  }
  CHECK(throws_error_mentioning([&] { layers::conv2d(x, w, Tensor(), options(1, -1, 1)); },
                                {"conv2d", "padding", "[2, 3, 8, 8]", "[4, 3, 3, 3]"}));
}

TEST_CASE("conv2d rejects an empty kernel and a bias that does not match the weight") {
  const Tensor x = zeros({2, 3, 8, 8});
  CHECK(throws_error_mentioning([&] { layers::conv2d(x, zeros({4, 3, 0, 3}), Tensor()); }, {"conv2d", "[4, 3, 0, 3]"}));
  CHECK(throws_error_mentioning(
      [&] {
        layers::conv2d(x, zeros({4, 3, 3, 3}), zeros({5}));
      },
      {"conv2d", "[5]", "[4, 3, 3, 3]"}));
}

TEST_CASE("conv2d layer (Conv2d) rejects a non-positive kernel size, stride, dilation or channel count") {
  for (const std::int64_t bad : {0, -2}) {
    layers::Conv2dOptions o;
    o.kernel_size = bad;
    CHECK(throws_error_mentioning([&] { layers::Conv2d(3, 4, o); }, {"Conv2d", "kernel_size", std::to_string(bad)}));
    o = {};
    o.stride = bad;
    CHECK(throws_error_mentioning([&] { layers::Conv2d(3, 4, o); }, {"Conv2d", "stride", std::to_string(bad)}));
    o = {};
    o.dilation = bad;
    CHECK(throws_error_mentioning([&] { layers::Conv2d(3, 4, o); }, {"Conv2d", "dilation", std::to_string(bad)}));
    CHECK(throws_error_mentioning([&] { layers::Conv2d(bad, 4); }, {"Conv2d", "channel"}));
  }
  layers::Conv2dOptions o;
  o.padding = -1;
  CHECK(throws_error_mentioning([&] { layers::Conv2d(3, 4, o); }, {"Conv2d", "padding", "-1"}));
}

TEST_CASE("conv2d rejects an input and weight on different devices") {
  const Tensor x = zeros({2, 3, 8, 8}, {DType::Float32, cpu(1)});
  const Tensor w = zeros({4, 3, 3, 3});
  CHECK(throws_error_mentioning([&] { layers::conv2d(x, w, Tensor()); },
                                {"conv2d", "cpu:1", "cpu:0", "[2, 3, 8, 8]", "[4, 3, 3, 3]"}));
  CHECK(throws_error_mentioning(
      [&] {
        layers::conv2d(zeros({2, 3, 8, 8}), w, zeros({4}, {DType::Float32, cpu(1)}));
      },
      {"conv2d", "cpu:1", "[4]"}));
}

TEST_CASE("conv2d on every CUDA device matches the CPU, forward and backward" * doctest::test_suite("cuda")) {
  if (!cuda_available()) return test::skip("no CUDA device");
  const std::vector<ConvCase> cases{
      {7, 5, 9, 11, 3, 3, 3, options(2, 1, 1)},    {2, 3, 10, 8, 5, 3, 3, options(1, 1, 2)},
      {4, 32, 12, 12, 16, 3, 3, options(1, 0, 1)}, {2, 4, 6, 7, 3, 1, 1, options(1, 0, 1)},
      {3, 1, 13, 13, 6, 5, 5, options(2, 2, 1)},
  };
  // cuDNN may pick FFT or Winograd algorithms, whose transforms round
  // differently from a direct sum: 1e-3 absolute on values of size ~10 is far
  // below what a wrong layout or missing term would give.
  constexpr double kAtol = 1e-3, kRtol = 1e-4;
  Generator generator(81);
  for (const ConvCase& t : cases) {
    for (const bool with_bias : {true, false}) {
      const std::string conv_case = describe(t);
      CAPTURE(conv_case);
      CAPTURE(with_bias);
      const Tensor x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator);
      const Tensor w = test::uniform_tensor({t.k, t.c, t.kh, t.kw}, generator);
      const Tensor b = with_bias ? test::uniform_tensor({t.k}, generator) : Tensor();
      const Tensor x_cpu = x.clone().set_requires_grad(), w_cpu = w.clone().set_requires_grad();
      const Tensor b_cpu = with_bias ? b.clone().set_requires_grad() : Tensor();
      const Tensor y_cpu = layers::conv2d(x_cpu, w_cpu, b_cpu, t.options);
      const Tensor upstream = test::uniform_tensor(y_cpu.shape(), generator);
      y_cpu.backward(upstream);
      for (int index = 0; index < device_count(DeviceType::CUDA); ++index) {
        CAPTURE(index);
        const Tensor x_gpu = x.to(cuda(index)).set_requires_grad(), w_gpu = w.to(cuda(index)).set_requires_grad();
        const Tensor b_gpu = with_bias ? b.to(cuda(index)).set_requires_grad() : Tensor();
        const Tensor y_gpu = layers::conv2d(x_gpu, w_gpu, b_gpu, t.options);
        y_gpu.backward(upstream.to(cuda(index)));
        CHECK(all_close(y_gpu.to(cpu()), y_cpu, kAtol, kRtol));
        CHECK(all_close(x_gpu.grad().to(cpu()), x_cpu.grad(), kAtol, kRtol));
        CHECK(all_close(w_gpu.grad().to(cpu()), w_cpu.grad(), kAtol, kRtol));
        if (with_bias) CHECK(all_close(b_gpu.grad().to(cpu()), b_cpu.grad(), kAtol, kRtol));
      }
    }
  }
}

namespace {

// The float64 gradients of sum(y * dy) for conv2d without bias: dx and dw,
// each with the sum of its terms' magnitudes, from which float32's error
// bound follows (see within_dot_product_bound).
struct ReferenceGradients {
  std::vector<double> dx, dx_magnitude, dw, dw_magnitude;
};
ReferenceGradients reference_conv2d_backward(const ConvCase& t, const std::vector<float>& x,
                                             const std::vector<float>& w, const std::vector<float>& dy) {
  const std::int64_t s = t.options.stride, p = t.options.padding, d = t.options.dilation;
  const std::int64_t oh_count = (t.h + 2 * p - d * (t.kh - 1) - 1) / s + 1;
  const std::int64_t ow_count = (t.w + 2 * p - d * (t.kw - 1) - 1) / s + 1;
  ReferenceGradients r{std::vector<double>(x.size()), std::vector<double>(x.size()), std::vector<double>(w.size()),
                       std::vector<double>(w.size())};
  for (std::int64_t n = 0; n < t.n; ++n) {
    for (std::int64_t k = 0; k < t.k; ++k) {
      for (std::int64_t oh = 0; oh < oh_count; ++oh) {
        for (std::int64_t ow = 0; ow < ow_count; ++ow) {
          const double g = dy[static_cast<std::size_t>(((n * t.k + k) * oh_count + oh) * ow_count + ow)];
          for (std::int64_t c = 0; c < t.c; ++c) {
            for (std::int64_t i = 0; i < t.kh; ++i) {
              for (std::int64_t j = 0; j < t.kw; ++j) {
                const std::int64_t ih = oh * s - p + i * d, iw = ow * s - p + j * d;
                if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
                const auto xi = static_cast<std::size_t>(((n * t.c + c) * t.h + ih) * t.w + iw);
                const auto wi = static_cast<std::size_t>(((k * t.c + c) * t.kh + i) * t.kw + j);
                r.dx[xi] += w[wi] * g;
                r.dx_magnitude[xi] += std::abs(w[wi] * g);
                r.dw[wi] += x[xi] * g;
                r.dw_magnitude[wi] += std::abs(x[xi] * g);
              }
            }
          }
        }
      }
    }
  }
  return r;
}

}  // namespace

TEST_CASE("conv2d with the Winograd and direct algorithms stays within float32's error bound, both ways") {
  // 3x3 at stride 1 with channels in multiples of 16, where oneDNN has a
  // Winograd F(4x4, 3x3) kernel (on AVX-512) and ddl's own takes its place
  // elsewhere; sides that are no multiple of the 4x4 output tiles.
  Generator generator(81);
  const config::CpuConvolution before = config::cpu_convolution();
  for (const std::int64_t padding : {0, 1}) {
    const ConvCase t{3, 32, 13, 11, 16, 3, 3, options(1, padding, 1)};
    const std::string conv_case = describe(t);
    CAPTURE(conv_case);
    const Tensor x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator);
    const Tensor w = test::uniform_tensor({t.k, t.c, t.kh, t.kw}, generator);
    const std::vector<float> y_expected = reference_conv2d(t, x.to_vector<float>(), w.to_vector<float>(), {});
    for (const auto algorithm : {config::CpuConvolution::Winograd, config::CpuConvolution::Direct}) {
      const bool winograd = algorithm == config::CpuConvolution::Winograd;
      set_cpu_convolution(algorithm);
      const std::string implementation = cpu_backend::conv2d_implementation(
          {t.n, t.c, t.h, t.w, t.k, t.kh, t.kw, 1, padding, 1, t.h - 2 + 2 * padding, t.w - 2 + 2 * padding});
      CAPTURE(implementation);
      if (winograd) CHECK(implementation.find("wino") != std::string::npos);
      if (!winograd) CHECK(implementation.find("wino") == std::string::npos);
      const Tensor xs = x.clone().set_requires_grad(), ws = w.clone().set_requires_grad();
      const Tensor y = layers::conv2d(xs, ws, Tensor(), t.options);
      const Tensor dy = test::uniform_tensor(y.shape(), generator);
      y.backward(dy);
      const ReferenceGradients r =
          reference_conv2d_backward(t, x.to_vector<float>(), w.to_vector<float>(), dy.to_vector<float>());
      // The forward sums' magnitudes: |w| convolved with |x|.
      const std::vector<float> ym = layers::conv2d(abs(x), abs(w), Tensor(), t.options).to_vector<float>();
      double ratio_y = 0, ratio_dx = 0, ratio_dw = 0;
      CHECK(within_dot_product_bound(y, {y_expected.begin(), y_expected.end()}, {ym.begin(), ym.end()},
                                     t.c * t.kh * t.kw, &ratio_y));
      CHECK(within_dot_product_bound(xs.grad(), r.dx, r.dx_magnitude, t.k * t.kh * t.kw, &ratio_dx));
      CHECK(within_dot_product_bound(ws.grad(), r.dw, r.dw_magnitude, t.n * y.size(2) * y.size(3), &ratio_dw));
      MESSAGE(
          fmt::format("{} ({}): worst error / (2^-24 sum |terms|): forward {:.2f}, input gradient {:.2f}, "
                      "weight gradient {:.2f}",
                      winograd ? "winograd" : "direct", implementation, ratio_y, ratio_dx, ratio_dw));
    }
  }
  set_cpu_convolution(before);
}

namespace {

// What float32's error bound for Winograd's F(4x4, 3x3) is measured
// against: the forward convolution computed the Winograd way with every
// matrix entry and operand made positive, in double (a bound on each
// rounded operation's operands, tile by tile). The matrices are Lavin &
// Gray's, written out here independently of the kernels'.
std::vector<double> winograd_magnitudes(const ConvCase& t, const std::vector<float>& x, const std::vector<float>& w,
                                        const std::vector<float>& b) {
  using Matrix = std::vector<std::vector<double>>;
  const Matrix bt = {{4, 0, 5, 0, 1, 0}, {0, 4, 4, 1, 1, 0}, {0, 4, 4, 1, 1, 0},
                     {0, 2, 1, 2, 1, 0}, {0, 2, 1, 2, 1, 0}, {0, 4, 0, 5, 0, 1}};
  const Matrix g = {{1.0 / 4, 0, 0},
                    {1.0 / 6, 1.0 / 6, 1.0 / 6},
                    {1.0 / 6, 1.0 / 6, 1.0 / 6},
                    {1.0 / 24, 1.0 / 12, 1.0 / 6},
                    {1.0 / 24, 1.0 / 12, 1.0 / 6},
                    {0, 0, 1}};
  const Matrix at = {{1, 1, 1, 1, 1, 0}, {0, 1, 1, 2, 2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, 1, 8, 8, 1}};
  // m · in · mᵀ
  const auto sandwich = [](const Matrix& m, const Matrix& in) {
    const std::size_t rows = m.size(), inner = in.size();
    Matrix half(rows, std::vector<double>(inner)), out(rows, std::vector<double>(rows));
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < inner; ++j) {
        for (std::size_t s = 0; s < inner; ++s) half[i][j] += m[i][s] * in[s][j];
      }
    }
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < rows; ++j) {
        for (std::size_t s = 0; s < inner; ++s) out[i][j] += half[i][s] * m[j][s];
      }
    }
    return out;
  };
  const std::int64_t p = t.options.padding, oh = t.h + 2 * p - 2, ow = t.w + 2 * p - 2;
  const auto at_index = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  std::vector<Matrix> u(at_index(t.k * t.c));  // |G| |w[k][c]| |G|ᵀ
  for (std::int64_t f = 0; f < t.k * t.c; ++f) {
    Matrix filter(3, std::vector<double>(3));
    for (std::int64_t r = 0; r < 9; ++r) filter[at_index(r / 3)][at_index(r % 3)] = std::abs(w[at_index(f * 9 + r)]);
    u[at_index(f)] = sandwich(g, filter);
  }
  std::vector<double> magnitude(at_index(t.n * t.k * oh * ow));
  for (std::int64_t n = 0; n < t.n; ++n) {
    for (std::int64_t row = 0; row < oh; row += 4) {
      for (std::int64_t col = 0; col < ow; col += 4) {
        std::vector<Matrix> v(at_index(t.c));  // |Bᵀ| |patch of channel c| |B|
        for (std::int64_t c = 0; c < t.c; ++c) {
          Matrix patch(6, std::vector<double>(6));
          for (std::int64_t i = 0; i < 6; ++i) {
            for (std::int64_t j = 0; j < 6; ++j) {
              const std::int64_t y = row - p + i, xx = col - p + j;
              if (y < 0 || y >= t.h || xx < 0 || xx >= t.w) continue;
              patch[at_index(i)][at_index(j)] = std::abs(x[at_index(((n * t.c + c) * t.h + y) * t.w + xx)]);
            }
          }
          v[at_index(c)] = sandwich(bt, patch);
        }
        for (std::int64_t k = 0; k < t.k; ++k) {
          Matrix product(6, std::vector<double>(6));
          for (std::int64_t c = 0; c < t.c; ++c) {
            for (std::size_t i = 0; i < 6; ++i) {
              for (std::size_t j = 0; j < 6; ++j)
                product[i][j] += u[at_index(k * t.c + c)][i][j] * v[at_index(c)][i][j];
            }
          }
          const Matrix tile = sandwich(at, product);
          for (std::int64_t i = 0; i < 4 && row + i < oh; ++i) {
            for (std::int64_t j = 0; j < 4 && col + j < ow; ++j) {
              magnitude[at_index(((n * t.k + k) * oh + row + i) * ow + col + j)] =
                  tile[at_index(i)][at_index(j)] + (b.empty() ? 0.0 : std::abs(b[at_index(k)]));
            }
          }
        }
      }
    }
  }
  return magnitude;
}

// The rounded operations on the way to one output beyond the sum over the
// C input channels: Bᵀ d B two passes of at most 4 terms (8), G g Gᵀ two
// passes of 3 with 1/6 and 1/24 rounded in G (8), the product (1), Aᵀ M A
// two passes of 5 (10) and the bias (1). Float32's bound for an output is
// then (C + 28) 2^-24 times its Winograd magnitude.
constexpr std::int64_t kWinogradRoundings = 28;

}  // namespace

TEST_CASE(
    "conv2d under auto: ddl's Winograd pays off for the MNIST CNN's and resnet_small's layers (and runs them where "
    "oneDNN has no Winograd kernel), not for small ones") {
  // oneDNN's Winograd on AVX-512, ddl's elsewhere (winograd::pays_off),
  // where ddl's then runs resnet_small's layers too (on AVX-512 they are
  // oneDNN's choice).
  const config::CpuConvolution before = config::cpu_convolution();
  set_cpu_convolution(config::CpuConvolution::Auto);
  const std::string mnist = cpu_backend::conv2d_implementation({128, 32, 26, 26, 64, 3, 3, 1, 0, 1, 24, 24});
  CAPTURE(mnist);
  CHECK(mnist.find("wino") != std::string::npos);
  const bool ddls = mnist == "ddl_winograd_4x3";
  for (const layers::Conv2dGeometry& g : {layers::Conv2dGeometry{128, 16, 28, 28, 16, 3, 3, 1, 1, 1, 28, 28},
                                          layers::Conv2dGeometry{128, 32, 14, 14, 32, 3, 3, 1, 1, 1, 14, 14},
                                          layers::Conv2dGeometry{128, 64, 7, 7, 64, 3, 3, 1, 1, 1, 7, 7}}) {
    CHECK(cpu_backend::winograd::pays_off(g));
    if (ddls) CHECK(cpu_backend::conv2d_implementation(g) == "ddl_winograd_4x3");
  }
  // Too few channels for the image, too few at all, too small an image.
  for (const layers::Conv2dGeometry& g : {layers::Conv2dGeometry{128, 16, 14, 14, 16, 3, 3, 1, 1, 1, 14, 14},
                                          layers::Conv2dGeometry{128, 8, 28, 28, 8, 3, 3, 1, 1, 1, 28, 28},
                                          layers::Conv2dGeometry{128, 64, 6, 6, 64, 3, 3, 1, 1, 1, 6, 6}}) {
    CHECK(!cpu_backend::winograd::pays_off(g));
    CHECK(cpu_backend::conv2d_implementation(g) != "ddl_winograd_4x3");
  }
  set_cpu_convolution(before);
}

TEST_CASE("conv2d under ddl-winograd runs ddl's own Winograd kernels on any CPU, and not where they do not apply") {
  // On AVX-512 too, where auto and winograd take oneDNN's kernel; the
  // layer's result is then the kernel's own bits.
  Generator generator(89);
  const config::CpuConvolution before = config::cpu_convolution();
  set_cpu_convolution(config::CpuConvolution::DdlWinograd);
  const ConvCase t{2, 16, 9, 10, 16, 3, 3, options(1, 1, 1)};
  const layers::Conv2dGeometry g{t.n, t.c, t.h, t.w, t.k, 3, 3, 1, 1, 1, t.h, t.w};
  CHECK(cpu_backend::conv2d_implementation(g) == "ddl_winograd_4x3");
  const Tensor x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator);
  const Tensor w = test::uniform_tensor({t.k, t.c, 3, 3}, generator);
  const Tensor b = test::uniform_tensor({t.k}, generator);
  std::vector<float> y(static_cast<std::size_t>(t.n * t.k * t.h * t.w));
  cpu_backend::winograd::forward(g, x.data<float>(), w.data<float>(), b.data<float>(), y.data());
  CHECK(layers::conv2d(x, w, b, t.options).to_vector<float>() == y);
  // Stride 2 and a 5x5 kernel are not Winograd F(4x4, 3x3)'s.
  CHECK(cpu_backend::conv2d_implementation({2, 16, 9, 10, 16, 3, 3, 2, 1, 1, 5, 5}) != "ddl_winograd_4x3");
  CHECK(cpu_backend::conv2d_implementation({2, 16, 9, 10, 16, 5, 5, 1, 2, 1, 9, 10}) != "ddl_winograd_4x3");
  set_cpu_convolution(before);
}

// Forces the Winograd transforms' width while in scope, then puts back the
// build's own.
struct TransformLanes {
  explicit TransformLanes(int lanes) { cpu_backend::winograd::set_transform_lanes(lanes); }
  ~TransformLanes() { cpu_backend::winograd::set_transform_lanes(0); }
  TransformLanes(const TransformLanes&) = delete;
  TransformLanes& operator=(const TransformLanes&) = delete;
};

TEST_CASE(
    "conv2d by ddl's own Winograd kernels stays within float32's error bound, both ways, on any thread count and "
    "vector width") {
  // The kernels called directly: conv2d runs them only where oneDNN has no
  // Winograd kernel (CPUs without AVX-512). Channel counts short of a block
  // of 8 or 16 lanes, of whole blocks, and of blocks and a bit, sides that are no
  // multiple of the 4x4 tiles, every padding they take, and a batch of more
  // than one chunk.
  Generator generator(87);
  const test::NumThreadsGuard threads_before;
  for (const ConvCase& t :
       {ConvCase{3, 17, 13, 11, 33, 3, 3, options(1, 0, 1)}, ConvCase{2, 5, 9, 10, 7, 3, 3, options(1, 1, 1)},
        ConvCase{4, 32, 6, 7, 16, 3, 3, options(1, 2, 1)}, ConvCase{58, 3, 66, 66, 5, 3, 3, options(1, 0, 1)},
        ConvCase{8, 32, 46, 46, 32, 3, 3, options(1, 0, 1)}}) {
    const std::string conv_case = describe(t);
    CAPTURE(conv_case);
    const std::int64_t p = t.options.padding, oh = t.h + 2 * p - 2, ow = t.w + 2 * p - 2;
    const layers::Conv2dGeometry g{t.n, t.c, t.h, t.w, t.k, 3, 3, 1, p, 1, oh, ow};
    REQUIRE(cpu_backend::winograd::applies(g));
    const bool chunked = cpu_backend::winograd::images_per_chunk(g) < t.n;
    const std::vector<float> x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator).to_vector<float>();
    const std::vector<float> w = test::uniform_tensor({t.k, t.c, 3, 3}, generator).to_vector<float>();
    const std::vector<float> b = test::uniform_tensor({t.k}, generator).to_vector<float>();
    const std::vector<float> dy = test::uniform_tensor({t.n, t.k, oh, ow}, generator).to_vector<float>();
    const std::vector<float> y_expected = reference_conv2d(t, x, w, b);
    const std::vector<double> ym = winograd_magnitudes(t, x, w, b);
    const ReferenceGradients r = reference_conv2d_backward(t, x, w, dy);
    // The input's gradient is the forward convolution of dy with the filters
    // turned and the channel roles swapped, at padding 2 - p.
    std::vector<float> turned(w.size());
    for (std::int64_t k = 0; k < t.k; ++k) {
      for (std::int64_t c = 0; c < t.c; ++c) {
        for (std::int64_t r9 = 0; r9 < 9; ++r9) {
          turned[static_cast<std::size_t>((c * t.k + k) * 9 + r9)] =
              w[static_cast<std::size_t>((k * t.c + c) * 9 + 8 - r9)];
        }
      }
    }
    const std::vector<double> dx_magnitude =
        winograd_magnitudes({t.n, t.k, oh, ow, t.c, 3, 3, options(1, 2 - p, 1)}, dy, turned, {});
    std::vector<double> db(static_cast<std::size_t>(t.k)), db_magnitude(db.size());
    for (std::size_t i = 0; i < dy.size(); ++i) {
      const auto k = static_cast<std::size_t>(static_cast<std::int64_t>(i) / (oh * ow) % t.k);
      db[k] += dy[i];
      db_magnitude[k] += std::abs(dy[i]);
    }

    // The transforms take 8 channels at once (AVX2's width) or 16
    // (AVX-512's), each checked against the bound: a width the CPU lacks is
    // emulated (16 lanes on AVX2: a pair of registers a vector), where GCC
    // fuses multiplies and adds into FMAs differently, so the bits may
    // differ in the last place.
    // The last two cases' chunks (9 and 8) and weight-gradient groups (9
    // and 8) run one to a thread on 1 and 2 threads, and one after another,
    // each split over the threads, on 3 (fewer than 4 a thread): the same
    // bits either way. The last one's products are large enough for the
    // tiled oneDNN GEMM inside each thread's chunk.
    for (const int lanes : {8, 16}) {
      CAPTURE(lanes);
      const TransformLanes forced(lanes);
      CHECK(cpu_backend::winograd::transform_lanes() == lanes);
      std::vector<std::vector<float>> first_run;
      for (const int threads : {1, 2, 3}) {
        CAPTURE(threads);
        set_num_threads(threads);
        std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), dbias(b.size());
        cpu_backend::winograd::forward(g, x.data(), w.data(), b.data(), y.data());
        cpu_backend::winograd::backward(g, {x.data(), w.data(), dy.data(), dx.data(), dw.data(), dbias.data()});
        if (threads > 1) {
          CHECK(y == first_run[0]);
          CHECK(dx == first_run[1]);
          CHECK(dw == first_run[2]);
          CHECK(dbias == first_run[3]);
          continue;
        }
        double ratio_y = 0, ratio_dx = 0, ratio_dw = 0, ratio_db = 0;
        CHECK(within_dot_product_bound(from_vector(y, {t.n, t.k, oh, ow}), {y_expected.begin(), y_expected.end()}, ym,
                                       t.c + kWinogradRoundings, &ratio_y));
        CHECK(within_dot_product_bound(from_vector(dx, {t.n, t.c, t.h, t.w}), r.dx, dx_magnitude,
                                       t.k + kWinogradRoundings, &ratio_dx));
        CHECK(within_dot_product_bound(from_vector(dw, {t.k, t.c, 3, 3}), r.dw, r.dw_magnitude, t.n * oh * ow,
                                       &ratio_dw));
        CHECK(within_dot_product_bound(from_vector(dbias, {t.k}), db, db_magnitude, t.n * oh * ow, &ratio_db));
        MESSAGE(
            fmt::format("ddl_winograd_4x3{}, {} lanes: worst error / (2^-24 magnitude): forward {:.2f}, input "
                        "gradient {:.2f} (of Winograd's magnitudes), weight gradient {:.2f}, bias gradient {:.2f}",
                        chunked ? " (batch in chunks)" : "", lanes, ratio_y, ratio_dx, ratio_dw, ratio_db));
        first_run = {y, dx, dw, dbias};
      }
      // Each gradient alone (the others frozen) is the same sum.
      std::vector<float> dx_alone(x.size()), dw_alone(w.size()), dbias_alone(b.size());
      cpu_backend::winograd::backward(g, {nullptr, w.data(), dy.data(), dx_alone.data(), nullptr, nullptr});
      cpu_backend::winograd::backward(g, {x.data(), nullptr, dy.data(), nullptr, dw_alone.data(), nullptr});
      cpu_backend::winograd::backward(g, {x.data(), nullptr, dy.data(), nullptr, nullptr, dbias_alone.data()});
      CHECK(dx_alone == first_run[1]);
      CHECK(dw_alone == first_run[2]);
      CHECK(dbias_alone == first_run[3]);
    }
  }
  {
    const TransformLanes kept(16);
    CHECK(test::throws_error_mentioning([] { cpu_backend::winograd::set_transform_lanes(4); },
                                        {"set_transform_lanes", "4 lanes", "8 or 16"}));
    CHECK(cpu_backend::winograd::transform_lanes() == 16);
  }
  const int native = cpu_backend::winograd::transform_lanes();
  CHECK((native == 8 || native == 16));
  // The last two cases really went through in 9 and 8 chunks.
  CHECK(cpu_backend::winograd::images_per_chunk({58, 3, 66, 66, 5, 3, 3, 1, 0, 1, 64, 64}) == 7);
  CHECK(cpu_backend::winograd::images_per_chunk({8, 32, 46, 46, 32, 3, 3, 1, 0, 1, 44, 44}) == 1);
}

TEST_CASE("conv2d's weight and bias gradients for few input channels (unfolded) stay within float32's bound") {
  // Fewer than 8 input channels: the weight's side runs on the unfolded
  // patches (conv2d_unfold_cpu.cpp) on every CPU. Strides, dilation,
  // padding wider than the kernel, a non-square kernel, and batches that
  // share the 16 groups unevenly or leave some empty.
  Generator generator(89);
  for (const ConvCase& t :
       {ConvCase{19, 1, 28, 28, 32, 3, 3, options(1, 0, 1)}, ConvCase{5, 3, 11, 9, 6, 5, 3, options(2, 3, 1)},
        ConvCase{17, 7, 10, 12, 4, 3, 3, options(1, 1, 2)}, ConvCase{3, 2, 9, 8, 5, 2, 4, options(3, 2, 2)}}) {
    const std::string conv_case = describe(t);
    CAPTURE(conv_case);
    const Tensor x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator);
    const Tensor w = test::uniform_tensor({t.k, t.c, t.kh, t.kw}, generator).set_requires_grad();
    const Tensor b = test::uniform_tensor({t.k}, generator).set_requires_grad();
    const Tensor y = layers::conv2d(x, w, b, t.options);
    const Tensor dy = test::uniform_tensor(y.shape(), generator);
    y.backward(dy);
    const std::vector<float> dys = dy.to_vector<float>();
    const ReferenceGradients r = reference_conv2d_backward(t, x.to_vector<float>(), w.to_vector<float>(), dys);
    const std::int64_t pixels = y.size(2) * y.size(3);
    std::vector<double> db(static_cast<std::size_t>(t.k)), db_magnitude(db.size());
    for (std::size_t i = 0; i < dys.size(); ++i) {
      const auto k = static_cast<std::size_t>(static_cast<std::int64_t>(i) / pixels % t.k);
      db[k] += dys[i];
      db_magnitude[k] += std::abs(dys[i]);
    }
    double ratio_dw = 0, ratio_db = 0;
    CHECK(within_dot_product_bound(w.grad(), r.dw, r.dw_magnitude, t.n * pixels, &ratio_dw));
    CHECK(within_dot_product_bound(b.grad(), db, db_magnitude, t.n * pixels, &ratio_db));
    MESSAGE(fmt::format("unfolded: worst error / (2^-24 sum |terms|): weight gradient {:.2f}, bias gradient {:.2f}",
                        ratio_dw, ratio_db));
  }
}

TEST_CASE("conv2d in bf16 mixed precision multiplies bf16-rounded operands and sums them within float32's bound") {
  const test::CpuPrecisionGuard guard;
  if (!config::cpu_has_bf16()) {
    CHECK(test::throws_error_mentioning([] { set_cpu_precision(config::CpuPrecision::BFloat16); },
                                        {"set_cpu_precision(bf16)", "AVX512-BF16", "use float32"}));
    CHECK(config::cpu_precision() == guard.saved);
    MESSAGE("this CPU lacks AVX512-BF16: only the refusal was checked");
    return;
  }
  Generator generator(83);
  // Channels in 16s (oneDNN's blocked kernels), one input channel (the
  // MNIST CNN's first layer), and odd everything with stride 2.
  for (const ConvCase& t :
       {ConvCase{3, 32, 13, 11, 16, 3, 3, options(1, 1, 1)}, ConvCase{4, 1, 12, 9, 32, 3, 3, options(1, 0, 1)},
        ConvCase{2, 5, 10, 7, 6, 3, 2, options(2, 1, 1)}}) {
    const std::string conv_case = describe(t);
    CAPTURE(conv_case);
    const Tensor x = test::uniform_tensor({t.n, t.c, t.h, t.w}, generator);
    const Tensor w = test::uniform_tensor({t.k, t.c, t.kh, t.kw}, generator);
    set_cpu_precision(config::CpuPrecision::Float32);
    const Tensor y32 = layers::conv2d(x, w, Tensor(), t.options);
    const Tensor dy = test::uniform_tensor(y32.shape(), generator);
    // The references take the operands as bf16 rounds them: what is left
    // is float32's accumulation error.
    const std::vector<float> xr = test::bf16_rounded(x.to_vector<float>());
    const std::vector<float> wr = test::bf16_rounded(w.to_vector<float>());
    const std::vector<float> dyr = test::bf16_rounded(dy.to_vector<float>());
    const std::vector<float> y_expected = reference_conv2d(t, xr, wr, {});
    const ReferenceGradients r = reference_conv2d_backward(t, xr, wr, dyr);
    const std::vector<float> ym =
        layers::conv2d(abs(from_vector(xr, x.shape())), abs(from_vector(wr, w.shape())), Tensor(), t.options)
            .to_vector<float>();

    set_cpu_precision(config::CpuPrecision::BFloat16);
    const std::string implementation = cpu_backend::conv2d_implementation(
        {t.n, t.c, t.h, t.w, t.k, t.kh, t.kw, t.options.stride, t.options.padding, 1, y32.size(2), y32.size(3)});
    CAPTURE(implementation);
    // A bf16 kernel: jit_bf16 on AVX512-BF16 (Zen 4, Cooper Lake), amx on Sapphire Rapids.
    CHECK((implementation.find("bf16") != std::string::npos || implementation.find("amx") != std::string::npos));
    const Tensor xs = x.clone().set_requires_grad(), ws = w.clone().set_requires_grad();
    const Tensor y = layers::conv2d(xs, ws, Tensor(), t.options);
    y.backward(dy);
    CHECK(y.to_vector<float>() != y32.to_vector<float>());  // the operands really were rounded
    double ratio_y = 0, ratio_dx = 0, ratio_dw = 0;
    CHECK(within_dot_product_bound(y, {y_expected.begin(), y_expected.end()}, {ym.begin(), ym.end()}, t.c * t.kh * t.kw,
                                   &ratio_y));
    CHECK(within_dot_product_bound(xs.grad(), r.dx, r.dx_magnitude, t.k * t.kh * t.kw, &ratio_dx));
    CHECK(within_dot_product_bound(ws.grad(), r.dw, r.dw_magnitude, t.n * y.size(2) * y.size(3), &ratio_dw));
    MESSAGE(
        fmt::format("bf16 ({}): worst error against bf16-rounded operands / (2^-24 sum |terms|): forward {:.2f}, "
                    "input gradient {:.2f}, weight gradient {:.2f}",
                    implementation, ratio_y, ratio_dx, ratio_dw));
  }
}
