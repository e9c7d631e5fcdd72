// Upsample2d (layers/upsample2d.cpp): the forward gather and the backward
// block sums against plain loops on awkward sizes, gradients by finite
// differences, the argument checks, and the module.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/upsample2d.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::throws_error_mentioning;

namespace {

// Calls check(shape, scale) for scales 1, 2, 3 on random NCHW shapes whose
// extents (1, 3, 5, 7) have nothing in common, so a wrong row or plane
// stride cannot pass by luck.
template <class Check>
void for_awkward_cases(std::uint32_t seed, Check check) {
  const std::vector<std::int64_t> sizes{1, 3, 5, 7};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, sizes.size() - 1);
  for (int trial = 0; trial < 12; ++trial) {
    const Shape shape{sizes[pick(rng)], sizes[pick(rng)], sizes[pick(rng)], sizes[pick(rng)]};
    for (const std::int64_t scale : {1, 2, 3}) {
      CAPTURE(shape);
      CAPTURE(scale);
      check(shape, scale);
    }
  }
}

// out[p, i, j] = in[p, i / s, j / s], straight from the definition.
std::vector<float> reference_forward(const std::vector<float>& in, const Shape& shape, std::int64_t s) {
  const std::int64_t planes = shape[0] * shape[1], h = shape[2], w = shape[3];
  std::vector<float> out;
  for (std::int64_t p = 0; p < planes; ++p) {
    for (std::int64_t i = 0; i < h * s; ++i) {
      for (std::int64_t j = 0; j < w * s; ++j) out.push_back(in[static_cast<std::size_t>((p * h + i / s) * w + j / s)]);
    }
  }
  return out;
}

// grad_in[p, y, x] = the sum of grad over the s x s block that pixel became.
std::vector<float> reference_backward(const std::vector<float>& grad, const Shape& shape, std::int64_t s) {
  const std::int64_t planes = shape[0] * shape[1], h = shape[2], w = shape[3];
  std::vector<float> grad_in(static_cast<std::size_t>(planes * h * w), 0.0f);
  for (std::int64_t p = 0; p < planes; ++p) {
    for (std::int64_t i = 0; i < h * s; ++i) {
      for (std::int64_t j = 0; j < w * s; ++j) {
        grad_in[static_cast<std::size_t>((p * h + i / s) * w + j / s)] +=
            grad[static_cast<std::size_t>((p * h * s + i) * w * s + j)];
      }
    }
  }
  return grad_in;
}

}  // namespace

TEST_CASE("upsample_nearest2d: forward copies each pixel to its block on awkward sizes") {
  Generator generator(41);
  for_awkward_cases(41, [&](const Shape& shape, std::int64_t scale) {
    const Tensor x = test::uniform_tensor(shape, generator);
    const Tensor y = layers::upsample_nearest2d(x, scale);
    CHECK(y.shape() == Shape{shape[0], shape[1], shape[2] * scale, shape[3] * scale});
    CHECK(all_close(y, reference_forward(x.to_vector<float>(), shape, scale), 0, 0));
  });
}

TEST_CASE("upsample_nearest2d: backward sums each block's gradients into its pixel") {
  Generator generator(42);
  for_awkward_cases(42, [&](const Shape& shape, std::int64_t scale) {
    const Tensor x = test::uniform_tensor(shape, generator).set_requires_grad();
    const Tensor y = layers::upsample_nearest2d(x, scale);
    const Tensor upstream = test::uniform_tensor(y.shape(), generator);
    y.backward(upstream);
    CHECK(all_close(x.grad(), reference_backward(upstream.to_vector<float>(), shape, scale)));
  });
}

TEST_CASE("upsample_nearest2d: gradients match finite differences on random shapes") {
  Generator generator(43);
  std::mt19937 rng(43);
  for (int trial = 0; trial < 6; ++trial) {
    const Shape shape = test::random_shape(rng, 4, 60);
    const std::int64_t scale = 1 + trial % 3;
    CAPTURE(shape);
    CAPTURE(scale);
    const Tensor x = test::uniform_tensor(shape, generator);
    CHECK(test::gradcheck([scale](const std::vector<Tensor>& t) { return layers::upsample_nearest2d(t[0], scale); },
                          {x}));
  }
}

TEST_CASE("upsample_nearest2d: scale 1 is the identity") {
  Generator generator(44);
  const Tensor x = test::uniform_tensor({3, 5, 7, 1}, generator);
  CHECK(all_close(layers::upsample_nearest2d(x, 1), x, 0, 0));
}

TEST_CASE("upsample_nearest2d: an empty batch gives an empty output of the upsampled shape") {
  const Tensor y = layers::upsample_nearest2d(zeros({0, 3, 5, 7}), 2);
  CHECK(y.shape() == Shape{0, 3, 10, 14});
}

TEST_CASE("upsample_nearest2d: rejects a non-4-D input, a scale below 1, an int tensor and an output too large") {
  CHECK(throws_error_mentioning(
      [] {
        layers::upsample_nearest2d(zeros({3, 5, 7}), 2);
      },
      {"upsample_nearest2d", "4-D", "[3, 5, 7]"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::upsample_nearest2d(zeros({1, 1, 2, 2}), 0);
      },
      {"upsample_nearest2d", "scale", "0"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::upsample_nearest2d(zeros({1, 1, 2, 2}, {DType::Int32, cpu(), false}), 2);
      },
      {"upsample_nearest2d", "int32"}));
  constexpr std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 2;
  CHECK(throws_error_mentioning(
      [] {
        layers::upsample_nearest2d(zeros({1, 1, 2, 3}), huge);
      },
      {"upsample_nearest2d", "too large", "[1, 1, 2, 3]"}));
}

TEST_CASE("Upsample2d: the module applies its scale, describes itself and rejects scale 0") {
  Generator generator(45);
  layers::Upsample2d layer(3);
  CHECK(layer.scale() == 3);
  CHECK(layer.type_name() == "Upsample2d");
  CHECK(layers::Upsample2d().describe() == "Upsample2d(scale=2)");
  CHECK(layer.parameter_count() == 0);
  const Tensor x = test::uniform_tensor({2, 3, 5, 1}, generator);
  CHECK(all_close(layer(x), layers::upsample_nearest2d(x, 3), 0, 0));
  CHECK(throws_error_mentioning([] { layers::Upsample2d(0); }, {"Upsample2d", "scale", "0"}));
}

TEST_CASE("Upsample2d: a model summary shows the upsampled shape") {
  layers::Sequential model;
  model.add(std::make_shared<layers::Upsample2d>(2));
  const std::string text = layers::summary(model, {3, 5, 7});
  CHECK(text.find("Upsample2d(scale=2)") != std::string::npos);
  CHECK(text.find("(None, 3, 10, 14)") != std::string::npos);
}
