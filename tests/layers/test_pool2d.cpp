// MaxPool2d and AvgPool2d (layers/pool2d.cpp): values against a naive
// reference loop, padding semantics, gradients by finite differences, the
// modules, bad arguments, and (where a GPU exists) cuDNN against the CPU.
#include <doctest/doctest.h>

#include <ddl/core/cpu/onednn.hpp>
#include <ddl/ddl.hpp>
#include <ddl/layers/pool2d.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>

#include "support/gradcheck.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::layers::Pool2dOptions;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {

// The output extent by its definition, counting windows one by one: those
// that fit in the padded input, and with ceil_mode also one that runs past
// it by less than a stride, unless it starts in the right padding.
std::int64_t reference_extent(std::int64_t in, const Pool2dOptions& o) {
  const std::int64_t s = o.stride == 0 ? o.kernel_size : o.stride;
  std::int64_t count = 0;
  while (true) {
    const std::int64_t start = count * s - o.padding, end = start + o.kernel_size;
    const bool fits = end <= in + o.padding;
    const bool partial = o.ceil_mode && end < in + o.padding + s && start < in;
    if (!fits && !partial) return count;
    ++count;
  }
}

// Whether ceil_mode gives more windows than rounding down would.
bool ceil_adds_a_window(const Shape& shape, Pool2dOptions o) {
  const std::int64_t rows = reference_extent(shape[2], o), columns = reference_extent(shape[3], o);
  o.ceil_mode = false;
  return rows != reference_extent(shape[2], o) || columns != reference_extent(shape[3], o);
}

// One window of one plane: its input positions (flat indices in the plane,
// row-major) and its divisor for average pooling.
struct ReferenceWindow {
  std::vector<std::int64_t> positions;
  std::int64_t divisor = 0;
};

ReferenceWindow reference_window(const Pool2dOptions& o, std::int64_t h, std::int64_t w, std::int64_t oh,
                                 std::int64_t ow) {
  const std::int64_t s = o.stride == 0 ? o.kernel_size : o.stride, p = o.padding;
  ReferenceWindow window;
  for (std::int64_t kh = 0; kh < o.kernel_size; ++kh) {
    for (std::int64_t kw = 0; kw < o.kernel_size; ++kw) {
      const std::int64_t r = oh * s - p + kh, col = ow * s - p + kw;
      const bool in_input = r >= 0 && r < h && col >= 0 && col < w;
      const bool in_padding = r >= -p && r < h + p && col >= -p && col < w + p;
      if (in_input) window.positions.push_back(r * w + col);
      if (o.count_include_pad ? in_padding : in_input) ++window.divisor;
    }
  }
  return window;
}

// The definition, in double: max over each window's input positions (the
// first on ties), or their sum over the divisor.
std::vector<float> reference_pool(const Tensor& input, const Pool2dOptions& o, bool is_max) {
  const auto x = input.to_vector<float>();
  const std::int64_t planes = input.size(0) * input.size(1), h = input.size(2), w = input.size(3);
  std::vector<float> y;
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    for (std::int64_t oh = 0; oh < reference_extent(h, o); ++oh) {
      for (std::int64_t ow = 0; ow < reference_extent(w, o); ++ow) {
        const ReferenceWindow window = reference_window(o, h, w, oh, ow);
        double best = -INFINITY, total = 0.0;
        for (const std::int64_t at : window.positions) {
          best = std::max(best, static_cast<double>(x[static_cast<std::size_t>(plane * h * w + at)]));
          total += x[static_cast<std::size_t>(plane * h * w + at)];
        }
        y.push_back(static_cast<float>(is_max ? best : total / static_cast<double>(window.divisor)));
      }
    }
  }
  return y;
}

// Backward by the definition: each output's gradient goes to the first
// maximum of its window (max), or in equal shares of 1 / divisor to every
// input position of it (average).
std::vector<float> reference_pool_backward(const Tensor& input, const Tensor& grad_output, const Pool2dOptions& o,
                                           bool is_max) {
  const auto x = input.to_vector<float>(), dy = grad_output.to_vector<float>();
  const std::int64_t planes = input.size(0) * input.size(1), h = input.size(2), w = input.size(3);
  std::vector<double> dx(x.size(), 0.0);
  std::size_t out = 0;
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    for (std::int64_t oh = 0; oh < grad_output.size(2); ++oh) {
      for (std::int64_t ow = 0; ow < grad_output.size(3); ++ow, ++out) {
        const ReferenceWindow window = reference_window(o, h, w, oh, ow);
        std::size_t best = static_cast<std::size_t>(plane * h * w + window.positions.front());
        for (const std::int64_t position : window.positions) {
          const auto at = static_cast<std::size_t>(plane * h * w + position);
          if (!is_max) dx[at] += dy[out] / static_cast<double>(window.divisor);
          if (x[at] > x[best]) best = at;
        }
        if (is_max) dx[best] += dy[out];
      }
    }
  }
  return {dx.begin(), dx.end()};
}

// Odd sizes, stride 1 and 2, padding 0 and 1, batch 1 and 7, 3 channels.
// Then ceil_mode (adding a window, or not by PyTorch's rule: 5 + 1 padding
// with kernel 2, stride 2) and average pooling that does not count padding.
const std::vector<std::tuple<Shape, Pool2dOptions>> kForwardCases{
    {{1, 3, 7, 9}, {3, 1, 1}},
    {{7, 3, 7, 9}, {3, 2, 1}},
    {{7, 3, 5, 5}, {2, 0, 0}},
    {{1, 3, 9, 7}, {3, 2, 0}},
    {{7, 3, 5, 7}, {2, 1, 1}},
    {{1, 3, 3, 3}, {3, 1, 1}},
    {{8, 16, 33, 31}, {3, 2, 1}},  // enough work for the CPU loops to run threaded
    {{2, 3, 8, 9}, {.kernel_size = 3, .stride = 2, .ceil_mode = true}},
    {{1, 3, 8, 6}, {.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true}},
    {{3, 2, 5, 5}, {.kernel_size = 2, .stride = 2, .padding = 1, .ceil_mode = true}},
    {{2, 3, 7, 9}, {.kernel_size = 3, .stride = 2, .padding = 1, .count_include_pad = false}},
    {{1, 3, 8, 7}, {.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}},
    // Windows that tile the input (kernel == stride, no padding): the CPU's
    // vectorised path, with the partial windows of ceil_mode beside it.
    {{4, 5, 24, 24}, {2, 2, 0}},
    {{3, 4, 9, 11}, {.kernel_size = 3, .stride = 3, .ceil_mode = true}},
};

std::string describe_case(const Shape& shape, const Pool2dOptions& o) {
  std::ostringstream out;
  out << "input " << shape << " kernel " << o.kernel_size << " stride " << o.stride << " padding " << o.padding
      << " ceil_mode " << o.ceil_mode << " count_include_pad " << o.count_include_pad;
  return out.str();
}

}  // namespace

TEST_CASE("max_pool2d matches a naive loop on random data") {
  Generator generator(21);
  for (const auto& [shape, options] : kForwardCases) {
    const std::string described = describe_case(shape, options);
    CAPTURE(described);
    const Tensor x = test::uniform_tensor(shape, generator);
    const Tensor y = layers::max_pool2d(x, options);
    const std::vector<float> expected = reference_pool(x, options, true);
    REQUIRE(y.numel() == static_cast<std::int64_t>(expected.size()));
    CHECK(all_close(y, expected, 0, 0));
  }
}

TEST_CASE("max_pool2d keeps its winners only where a gradient will need them, with the same output either way") {
  Generator generator(27);
  for (const auto& [shape, options] : kForwardCases) {
    const std::string described = describe_case(shape, options);
    CAPTURE(described);
    Tensor x = test::uniform_tensor(shape, generator);
    reset_peak_memory_stats(x.device());
    const std::size_t before = memory_stats(x.device()).bytes_in_use;
    const Tensor plain = layers::max_pool2d(x, options);
    // Without a gradient: the output alone, no indices beside it.
    CHECK(memory_stats(x.device()).peak_bytes - before == static_cast<std::size_t>(plain.numel()) * sizeof(float));
    // With one: the output and an 8-byte index of its winner per element.
    x.set_requires_grad();
    reset_peak_memory_stats(x.device());
    const std::size_t with_plain = memory_stats(x.device()).bytes_in_use;
    const Tensor kept = layers::max_pool2d(x, options);
    CHECK(memory_stats(x.device()).peak_bytes - with_plain ==
          static_cast<std::size_t>(kept.numel()) * (sizeof(float) + sizeof(std::int64_t)));
    CHECK(all_close(kept, plain.to_vector<float>(), 0, 0));
  }
}

TEST_CASE("avg_pool2d matches a naive loop that divides by the window's padded or unpadded size") {
  Generator generator(22);
  for (const auto& [shape, options] : kForwardCases) {
    const std::string described = describe_case(shape, options);
    CAPTURE(described);
    const Tensor x = test::uniform_tensor(shape, generator);
    const Tensor y = layers::avg_pool2d(x, options);
    const std::vector<float> expected = reference_pool(x, options, false);
    REQUIRE(y.numel() == static_cast<std::int64_t>(expected.size()));
    CHECK(all_close(y, expected, 1e-6, 1e-5));
  }
}

TEST_CASE("pooling output shape is floor((in + 2 padding - kernel) / stride) + 1, stride 0 meaning kernel") {
  const Tensor x = zeros({2, 3, 7, 10});
  CHECK(layers::max_pool2d(x, {2, 0, 0}).shape() == Shape{2, 3, 3, 5});
  CHECK(layers::max_pool2d(x, {3, 2, 1}).shape() == Shape{2, 3, 4, 5});
  CHECK(layers::avg_pool2d(x, {3, 1, 1}).shape() == Shape{2, 3, 7, 10});
  CHECK(layers::avg_pool2d(x, {7, 3, 0}).shape() == Shape{2, 3, 1, 2});
}

TEST_CASE("pooling in ceil_mode rounds the extent up, but no window starts in the right padding") {
  const Tensor x = zeros({2, 3, 7, 10});
  // 7: (7 - 2) / 2 = 2.5 -> 3 + 1 windows; 10: (10 - 2) / 2 = 4 exactly, 5 either way.
  CHECK(layers::max_pool2d(x, {.kernel_size = 2, .ceil_mode = true}).shape() == Shape{2, 3, 4, 5});
  CHECK(layers::avg_pool2d(x, {.kernel_size = 3, .stride = 3, .ceil_mode = true}).shape() == Shape{2, 3, 3, 4});
  // 5 + 2 padding, kernel 2, stride 2: rounding up gives 4 windows, but the
  // 4th would start at 6 - 1 = 5, in the right padding: 3, as PyTorch.
  CHECK(layers::max_pool2d(zeros({1, 1, 5, 5}), {.kernel_size = 2, .stride = 2, .padding = 1, .ceil_mode = true})
            .shape() == Shape{1, 1, 3, 3});
  for (const auto& [shape, options] : kForwardCases) {
    const std::string described = describe_case(shape, options);
    CAPTURE(described);
    CHECK(layers::max_pool2d(zeros(shape), options).shape() ==
          Shape{shape[0], shape[1], reference_extent(shape[2], options), reference_extent(shape[3], options)});
  }
}

TEST_CASE("max_pool2d never picks a padded position, even when every value is negative") {
  const Tensor x = full({1, 1, 3, 3}, -5.0);
  CHECK(all_close(layers::max_pool2d(x, {3, 1, 1}), std::vector<float>(9, -5.0f), 0, 0));
}

TEST_CASE("avg_pool2d counts padded positions as zeros in the divisor") {
  // A 3x3 window at a corner of a padded 3x3 input of ones covers 4 ones.
  const Tensor y = layers::avg_pool2d(ones({1, 1, 3, 3}), {3, 1, 1});
  CHECK(all_close(y, {4 / 9.f, 6 / 9.f, 4 / 9.f, 6 / 9.f, 1.f, 6 / 9.f, 4 / 9.f, 6 / 9.f, 4 / 9.f}, 1e-6, 1e-6));
}

TEST_CASE("avg_pool2d without count_include_pad averages the input positions only") {
  const Tensor y =
      layers::avg_pool2d(ones({1, 1, 3, 3}), {.kernel_size = 3, .stride = 1, .padding = 1, .count_include_pad = false});
  CHECK(all_close(y, std::vector<float>(9, 1.0f), 0, 0));
}

TEST_CASE("avg_pool2d in ceil_mode does not count positions past the padding, even with count_include_pad") {
  // A 1x6 input, kernel 3, stride 2, padding 1: every window spans rows -1..1
  // (one input row, two padded). Across, ceil_mode adds a 4th window at
  // columns 5..7: column 5 is input, 6 padding, 7 past the padding, so it
  // divides by 3 rows x 2 columns.
  const Tensor x = from_vector({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {1, 1, 1, 6});
  const Tensor y = layers::avg_pool2d(x, {.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true});
  REQUIRE(y.shape() == Shape{1, 1, 1, 4});
  CHECK(all_close(y, {(1 + 2) / 9.f, (2 + 3 + 4) / 9.f, (4 + 5 + 6) / 9.f, 6 / 6.f}, 1e-6, 1e-6));
}

TEST_CASE("max_pool2d propagates NaN from its window") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = from_vector({1.f, nan, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f}, {1, 1, 2, 4});
  const auto y = layers::max_pool2d(x, {2, 2, 0}).to_vector<float>();
  REQUIRE(y.size() == 2);
  CHECK(std::isnan(y[0]));
  CHECK(y[1] == 8.f);
  // A NaN in a full window beside ceil_mode's partial ones, and -inf
  // everywhere else: the NaN wins its window, -inf the others.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values(15, -inf);
  values[7] = nan;  // row 1, column 2: the second window
  const auto z =
      layers::max_pool2d(from_vector(values, {1, 1, 3, 5}), {.kernel_size = 2, .stride = 2, .ceil_mode = true})
          .to_vector<float>();
  REQUIRE(z.size() == 6);
  CHECK(z[0] == -inf);
  CHECK(std::isnan(z[1]));
  for (std::size_t i = 2; i < z.size(); ++i) CHECK(z[i] == -inf);
}

TEST_CASE("max_pool2d backward sums the gradients of overlapping windows at their shared maximum") {
  // The centre is the maximum of all four 2x2 windows of a 3x3 plane.
  const Tensor x = from_vector({1.f, 2.f, 3.f, 4.f, 9.f, 5.f, 6.f, 7.f, 8.f}, {1, 1, 3, 3}).set_requires_grad();
  layers::max_pool2d(x, {2, 1, 0}).backward(from_vector({1.f, 2.f, 3.f, 4.f}, {1, 1, 2, 2}));
  CHECK(all_close(x.grad(), {0, 0, 0, 0, 10, 0, 0, 0, 0}, 0, 0));
}

TEST_CASE("max_pool2d sends a tied window's gradient to its first maximum, in ceil_mode too") {
  // Values from {0, 1, 2}: most windows hold ties. Finite differences cannot
  // check this (a step breaks the tie); the rule is the CPU's, see pool2d.hpp.
  std::mt19937 rng(28);
  std::uniform_int_distribution<int> level(0, 2);
  const Shape shape{2, 3, 7, 8};
  std::vector<float> values(static_cast<std::size_t>(shape.numel()));
  for (float& v : values) v = static_cast<float>(level(rng));
  const Tensor x = from_vector(values, shape);
  for (const Pool2dOptions& options :
       {Pool2dOptions{3, 2, 1}, Pool2dOptions{.kernel_size = 3, .stride = 2, .ceil_mode = true}, Pool2dOptions{2, 2, 0},
        Pool2dOptions{.kernel_size = 3, .stride = 3, .ceil_mode = true}}) {
    CAPTURE(describe_case(shape, options));
    const Tensor leaf = x.clone().set_requires_grad();
    const Tensor y = layers::max_pool2d(leaf, options);
    CHECK(all_close(y, reference_pool(x, options, true), 0, 0));
    const Tensor upstream = test::distinct_tensor(y.shape(), rng);
    y.backward(upstream);
    CHECK(all_close(leaf.grad(), reference_pool_backward(x, upstream, options, true), 1e-6, 0));
  }
}

namespace {

// x (NCHW) copied into oneDNN's channel-blocked layout nChwBc by hand, and
// marked so: as a convolution leaves its output (core/memory_form.hpp).
Tensor to_blocked(const Tensor& x, int block) {
  const std::int64_t n = x.size(0), c = x.size(1), plane = x.size(2) * x.size(3);
  const std::vector<float> in = x.to_vector<float>();
  const Tensor y = Tensor::empty(x.shape());
  auto* out = static_cast<float*>(y.stored_data());
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t k = 0; k < c; ++k) {
      for (std::int64_t p = 0; p < plane; ++p) {
        out[((i * (c / block) + k / block) * plane + p) * block + k % block] = in[(i * c + k) * plane + p];
      }
    }
  }
  y.set_stored_form(cpu_backend::onednn::channel_blocked(x.shape().to_vector(), block));
  return y;
}

// Bit for bit, NaNs included.
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("max_pool2d on oneDNN's channel-blocked layout gives NCHW's bits, ties, NaNs and overlaps included") {
  // Values from {0, 1, 2} (ties in most windows), a few NaNs and -infs.
  std::mt19937 rng(29);
  std::uniform_int_distribution<int> level(0, 2), spot(0, 2 * 32 * 7 * 9 - 1);
  const Shape shape{2, 32, 7, 9};
  std::vector<float> values(static_cast<std::size_t>(shape.numel()));
  for (float& v : values) v = static_cast<float>(level(rng));
  for (int i = 0; i < 20; ++i) values[static_cast<std::size_t>(spot(rng))] = std::numeric_limits<float>::quiet_NaN();
  for (int i = 0; i < 20; ++i) values[static_cast<std::size_t>(spot(rng))] = -std::numeric_limits<float>::infinity();
  const Tensor x = from_vector(values, shape);
  for (const int block : {8, 16}) {
    CAPTURE(block);
    for (const Pool2dOptions& options : {Pool2dOptions{2, 2, 0}, Pool2dOptions{3, 2, 1}, Pool2dOptions{3, 1, 1},
                                         Pool2dOptions{.kernel_size = 3, .stride = 2, .ceil_mode = true},
                                         Pool2dOptions{.kernel_size = 3, .stride = 3, .ceil_mode = true},
                                         Pool2dOptions{.kernel_size = 2, .stride = 2, .ceil_mode = true}}) {
      CAPTURE(describe_case(shape, options));
      const Tensor leaf = x.clone().set_requires_grad(), blocked_leaf = to_blocked(x, block).set_requires_grad();
      const Tensor y = layers::max_pool2d(leaf, options), blocked_y = layers::max_pool2d(blocked_leaf, options);
      CHECK(cpu_backend::onednn::channel_block(blocked_y) == block);
      CHECK(same_bits(blocked_y, y));
      {
        const NoGradGuard no_grad;  // no winners kept
        CHECK(same_bits(layers::max_pool2d(to_blocked(x, block), options), y));
      }
      // Distinct gradients, every seventh -0 (summed into a zeroed
      // pixel, it becomes +0; the blocked kernels must do the same).
      std::vector<float> upstream_values = test::distinct_tensor(y.shape(), rng).to_vector<float>();
      for (std::size_t i = 0; i < upstream_values.size(); i += 7) upstream_values[i] = -0.0f;
      const Tensor upstream = from_vector(upstream_values, y.shape());
      y.backward(upstream, true);
      // The output's gradient in NCHW, then in the blocked layout.
      for (const bool upstream_blocked : {false, true}) {
        CAPTURE(upstream_blocked);
        blocked_leaf.zero_grad();
        blocked_y.backward(upstream_blocked ? to_blocked(upstream, block) : upstream, true);
        CHECK(cpu_backend::onednn::channel_block(blocked_leaf.grad()) == block);
        CHECK(same_bits(blocked_leaf.grad(), leaf.grad()));
      }
    }
  }
}

TEST_CASE("pooling backward matches a naive scatter loop") {
  std::mt19937 rng(27);
  for (const auto& [shape, options] : kForwardCases) {
    const std::string described = describe_case(shape, options);
    CAPTURE(described);
    const Tensor x = test::distinct_tensor(shape, rng);  // no ties for max
    for (const bool is_max : {true, false}) {
      CAPTURE(is_max);
      const Tensor leaf = x.clone().set_requires_grad();
      const Tensor y = is_max ? layers::max_pool2d(leaf, options) : layers::avg_pool2d(leaf, options);
      const Tensor upstream = test::distinct_tensor(y.shape(), rng);
      y.backward(upstream);
      CHECK(all_close(leaf.grad(), reference_pool_backward(x, upstream, options, is_max), 1e-4, 1e-5));
    }
  }
}

TEST_CASE("max_pool2d gradients match finite differences on random shapes") {
  std::mt19937 rng(23);
  const std::vector<Pool2dOptions> options{{2, 0, 0}, {3, 1, 1},       {3, 2, 1},
                                           {2, 1, 1}, {3, 2, 1, true}, {2, 2, 1, true}};
  for (int trial = 0; trial < 8; ++trial) {
    const Pool2dOptions o = options[static_cast<std::size_t>(trial) % options.size()];
    const Shape shape{1 + trial % 3, 1 + (trial + 1) % 3, 3 + 2 * (trial % 2) + trial % 3, 4 + trial % 3};
    CAPTURE(describe_case(shape, o));
    // Distinct values 0.1 apart: the step of 1e-2 cannot change any argmax.
    const Tensor x = test::distinct_tensor(shape, rng);
    CHECK(gradcheck([o](const std::vector<Tensor>& t) { return layers::max_pool2d(t[0], o); }, {x}));
  }
}

TEST_CASE("avg_pool2d gradients match finite differences on random shapes") {
  Generator generator(24);
  std::mt19937 rng(24);
  const std::vector<Pool2dOptions> options{{2, 0, 0},
                                           {3, 1, 1},
                                           {3, 2, 1},
                                           {2, 1, 1},
                                           {3, 2, 1, true},
                                           {2, 2, 1, true},
                                           {3, 2, 1, true, false},
                                           {3, 1, 1, false, false}};
  for (int trial = 0; trial < 8; ++trial) {
    const Pool2dOptions o = options[static_cast<std::size_t>(trial) % options.size()];
    const Shape shape{test::awkward_size(rng) % 4 + 1, 1 + trial % 3, 3 + 2 * (trial % 2) + trial % 3, 4 + trial % 3};
    CAPTURE(describe_case(shape, o));
    const Tensor x = test::uniform_tensor(shape, generator);
    CHECK(gradcheck([o](const std::vector<Tensor>& t) { return layers::avg_pool2d(t[0], o); }, {x}));
  }
}

TEST_CASE("pooling modules apply their options and describe them") {
  Generator generator(25);
  const Tensor x = test::uniform_tensor({2, 3, 7, 7}, generator);
  layers::MaxPool2d max_layer({3, 2, 1});
  layers::AvgPool2d avg_layer({2});
  CHECK(max_layer.type_name() == "MaxPool2d");
  CHECK(max_layer.describe() == "MaxPool2d(kernel_size=3, stride=2, padding=1)");
  CHECK(avg_layer.type_name() == "AvgPool2d");
  CHECK(avg_layer.describe() == "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  CHECK(max_layer.parameter_count() == 0);
  CHECK(all_close(max_layer(x), layers::max_pool2d(x, {3, 2, 1}), 0, 0));
  CHECK(all_close(avg_layer(x), layers::avg_pool2d(x, {2, 2, 0}), 0, 0));
  const Pool2dOptions rounded_up{.kernel_size = 2, .ceil_mode = true, .count_include_pad = false};
  CHECK(layers::MaxPool2d(rounded_up).describe() == "MaxPool2d(kernel_size=2, stride=2, padding=0, ceil_mode=true)");
  CHECK(layers::AvgPool2d(rounded_up).describe() ==
        "AvgPool2d(kernel_size=2, stride=2, padding=0, ceil_mode=true, count_include_pad=false)");
  CHECK(all_close(layers::AvgPool2d(rounded_up)(x), layers::avg_pool2d(x, rounded_up), 0, 0));
}

TEST_CASE("pooling rejects an input that is not 4-D") {
  CHECK(throws_error_mentioning([] { layers::max_pool2d(zeros({3, 8, 8})); }, {"max_pool2d", "4-D", "[3, 8, 8]"}));
  CHECK(throws_error_mentioning([] { layers::avg_pool2d(zeros({8})); }, {"avg_pool2d", "4-D", "[8]"}));
}

TEST_CASE("pooling rejects a kernel larger than the padded input") {
  CHECK(throws_error_mentioning(
      [] {
        layers::max_pool2d(zeros({1, 2, 3, 8}), {5, 1, 0});
      },
      {"max_pool2d", "kernel 5x5", "[1, 2, 3, 8]", "padding 0"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::avg_pool2d(zeros({1, 2, 8, 2}), {5, 1, 1});
      },
      {"avg_pool2d", "kernel 5x5", "[1, 2, 8, 2]", "padding 1", "(10x4)"}));
}

TEST_CASE("pooling rejects a non-positive kernel or a negative stride") {
  CHECK(throws_error_mentioning(
      [] {
        layers::max_pool2d(zeros({1, 1, 4, 4}), {0, 1, 0});
      },
      {"max_pool2d", "kernel_size", "0"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::avg_pool2d(zeros({1, 1, 4, 4}), {2, -1, 0});
      },
      {"avg_pool2d", "stride", "-1"}));
  CHECK(throws_error_mentioning([] { layers::MaxPool2d({-2}); }, {"MaxPool2d", "kernel_size", "-2"}));
  CHECK(throws_error_mentioning([] { layers::AvgPool2d({2, -2}); }, {"AvgPool2d", "stride", "-2"}));
}

TEST_CASE("pooling rejects padding of more than half the kernel") {
  CHECK(throws_error_mentioning(
      [] {
        layers::max_pool2d(zeros({1, 1, 8, 8}), {3, 1, 2});
      },
      {"max_pool2d", "padding 2", "kernel size 3"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::avg_pool2d(zeros({1, 1, 8, 8}), {2, 2, -1});
      },
      {"avg_pool2d", "padding", "-1"}));
  CHECK(throws_error_mentioning([] { layers::AvgPool2d({2, 2, 2}); }, {"AvgPool2d", "padding 2", "kernel size 2"}));
}

TEST_CASE("pooling on every CUDA device matches the CPU, forward and backward" * doctest::test_suite("cuda")) {
  if (!cuda_available()) return test::skip("no CUDA device");
  // cuDNN sums in another order than the CPU loops and scales by 1/kernel^2
  // in its own way. Where signed terms cancel, that shows far above the
  // rounding of the result, so: integer inputs make every window sum exact
  // (only the scaling rounds), and a positive upstream gradient makes the
  // sums of window shares in backward free of cancellation.
  std::mt19937 rng(26);
  Generator generator(27);
  for (const auto& [shape, options] : kForwardCases) {
    const std::string described = describe_case(shape, options);
    CAPTURE(described);
    const Tensor x = test::distinct_tensor(shape, rng, cpu(), 1.0f);
    const Tensor upstream = test::positive_tensor(layers::max_pool2d(x, options).shape(), generator);
    for (const auto pool : {&layers::max_pool2d, &layers::avg_pool2d}) {
      if (pool == &layers::avg_pool2d && options.count_include_pad && ceil_adds_a_window(shape, options)) {
        // Refused on CUDA (pool2d.hpp).
        CHECK(throws_error_mentioning([&x, &options = options] { layers::avg_pool2d(x.to(cuda(0)), options); },
                                      {"avg_pool2d", "ceil_mode", "count_include_pad"}));
        continue;
      }
      const Tensor x_cpu = x.clone().set_requires_grad();
      pool(x_cpu, options).backward(upstream);
      for (int index = 0; index < device_count(DeviceType::CUDA); ++index) {
        const Tensor x_gpu = x.to(cuda(index)).set_requires_grad();
        const Tensor y_gpu = pool(x_gpu, options);
        y_gpu.backward(upstream.to(cuda(index)));
        CHECK(all_close(y_gpu.to(cpu()), pool(x, options), 1e-5, 1e-5));
        CHECK(all_close(x_gpu.grad().to(cpu()), x_cpu.grad(), 1e-5, 1e-5));
      }
    }
  }
}
