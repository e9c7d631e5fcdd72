// Dense (layers/dense.cpp): values against a reference loop, gradients by
// finite differences, Glorot initialisation bounds and shape errors.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/dense.hpp>

#include <cmath>
#include <random>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

TEST_CASE("dense computes x W + b like a reference loop") {
  Generator generator(11);
  for (const auto& [n, in, out] : {std::tuple{1, 3, 5}, {7, 13, 2}, {5, 1, 7}}) {
    const Tensor x = test::uniform_tensor({n, in}, generator);
    const Tensor w = test::uniform_tensor({in, out}, generator);
    const Tensor b = test::uniform_tensor({out}, generator);
    const auto xs = x.to_vector<float>(), ws = w.to_vector<float>(), bs = b.to_vector<float>();
    std::vector<float> expected(static_cast<std::size_t>(n * out));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < out; ++j) {
        double acc = bs[static_cast<std::size_t>(j)];
        for (int k = 0; k < in; ++k) acc += xs[static_cast<std::size_t>(i * in + k)] * ws[static_cast<std::size_t>(k * out + j)];
        expected[static_cast<std::size_t>(i * out + j)] = static_cast<float>(acc);
      }
    }
    CHECK(all_close(layers::dense(x, w, b), expected, 1e-5, 1e-5));
  }
}

TEST_CASE("dense gradients match finite differences, with and without bias") {
  Generator generator(12);
  std::mt19937 rng(12);
  for (int trial = 0; trial < 4; ++trial) {
    const std::int64_t n = test::awkward_size(rng), in = test::awkward_size(rng), out = test::awkward_size(rng);
    CAPTURE(n);
    CAPTURE(in);
    CAPTURE(out);
    const Tensor x = test::uniform_tensor({n, in}, generator);
    const Tensor w = test::uniform_tensor({in, out}, generator);
    const Tensor b = test::uniform_tensor({out}, generator);
    CHECK(gradcheck([](const std::vector<Tensor>& t) { return layers::dense(t[0], t[1], t[2]); }, {x, w, b}));
    CHECK(gradcheck([](const std::vector<Tensor>& t) { return layers::dense(t[0], t[1], Tensor()); }, {x, w}));
  }
}

TEST_CASE("Dense layer has in*out + out parameters and Glorot-uniform weights") {
  Generator generator(5);
  layers::Dense dense(9216, 128, true, &generator);
  CHECK(dense.parameter_count() == 9216 * 128 + 128);
  const float limit = std::sqrt(6.0f / (9216.0f + 128.0f));
  const auto w = dense.weight().to_vector<float>();
  float lo = 0.0f, hi = 0.0f;
  for (const float v : w) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  CHECK(lo >= -limit);
  CHECK(hi <= limit);
  CHECK(hi > 0.99f * limit);  // 1.2M draws reach the edge of the range
  CHECK(lo < -0.99f * limit);
  const auto bias = dense.bias().to_vector<float>();
  CHECK(std::all_of(bias.begin(), bias.end(), [](float v) { return v == 0.0f; }));
  CHECK(layers::Dense(4, 3, false).parameter_count() == 12);
}

TEST_CASE("Dense with the same generator seed starts from the same weights") {
  Generator a(99), b(99);
  CHECK(all_close(layers::Dense(13, 7, true, &a).weight(), layers::Dense(13, 7, true, &b).weight(), 0, 0));
}

TEST_CASE("dense rejects an input whose feature count differs from the weight's") {
  const Tensor x = zeros({4, 5});
  const Tensor w = zeros({6, 3});
  CHECK(throws_error_mentioning([&] { layers::dense(x, w, Tensor()); }, {"dense", "[4, 5]", "[6, 3]"}));
  CHECK(throws_error_mentioning([&] { layers::dense(zeros({4, 6}), w, zeros({4})); }, {"dense", "[4]", "[6, 3]"}));
}
