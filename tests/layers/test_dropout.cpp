// Dropout (layers/dropout.cpp): inverted scaling, the drop rate, identity in
// evaluation, the same mask in backward and for the same seed, bad rates,
// and the dropout of a part that carries its part of the whole's mask.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/dropout.hpp>

#include <cmath>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::throws_error_mentioning;

TEST_CASE("dropout zeroes about p of the elements and scales the rest by 1/(1-p)") {
  for (const float p : {0.25f, 0.5f}) {
    Generator generator(3);
    const std::int64_t n = 200003;
    const Tensor y = layers::dropout(ones({n}), p, true, &generator);
    std::int64_t dropped = 0, badly_scaled = 0;
    const float scale = 1.0f / (1.0f - p);
    for (const float v : y.to_vector<float>()) {
      if (v == 0.0f) {
        ++dropped;
      } else if (v != scale) {
        ++badly_scaled;
      }
    }
    CHECK(badly_scaled == 0);
    // Binomial(n, p): 6 standard deviations is far beyond chance.
    const double expected = p * static_cast<double>(n), sigma = std::sqrt(n * p * (1.0 - p));
    CHECK(std::abs(static_cast<double>(dropped) - expected) < 6.0 * sigma);
  }
}

TEST_CASE("dropout is the identity in evaluation mode and for p = 0") {
  Generator generator(4);
  const Tensor x = test::uniform_tensor({7, 13}, generator);
  CHECK(layers::dropout(x, 0.5f, false, &generator).same(x));
  CHECK(all_close(layers::dropout(x, 0.0f, true, &generator), x, 0, 0));
  layers::Dropout layer(0.5f, &generator);
  layer.eval();
  CHECK(all_close(layer(x), x, 0, 0));
}

TEST_CASE("dropout backward applies the forward mask and scale") {
  Generator generator(5);
  const Tensor x = test::uniform_tensor({5, 31}, generator).set_requires_grad();
  const Tensor upstream = test::uniform_tensor({5, 31}, generator);
  const Tensor y = layers::dropout(x, 0.3f, true, &generator);
  y.backward(upstream);
  const auto xs = x.to_vector<float>(), ys = y.to_vector<float>();
  const auto gs = x.grad().to_vector<float>(), us = upstream.to_vector<float>();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const bool kept = ys[i] != 0.0f;
    CHECK(gs[i] == doctest::Approx(kept ? us[i] / 0.7f : 0.0f).epsilon(1e-6));
  }
}

TEST_CASE("dropout masks are reproducible from the seed and differ between draws") {
  Generator a(17), b(17);
  const Tensor x = ones({1000});
  const Tensor first = layers::dropout(x, 0.5f, true, &a);
  CHECK(all_close(first, layers::dropout(x, 0.5f, true, &b), 0, 0));
  CHECK_FALSE(all_close(first, layers::dropout(x, 0.5f, true, &a), 0, 0));
}

TEST_CASE("dropout_of_part: the parts' masks, joined, are the whole tensor's, and the generator moves as for it") {
  // Awkward sizes: parts of 7 features (3, 2, 2) of rows of 5 x 7 x 3
  // elements, so parts start mid-way through the whole's 8-element words.
  for (const int dim : {1, -1}) {
    const Shape shape = dim == 1 ? Shape{5, 7, 3} : Shape{9, 7};
    const int d = shape.normalize_dim(dim, "test");
    Generator generator(41);
    const Tensor x = uniform(shape, 0.5f, 1.5f, {}, &generator);
    Generator whole_generator(42);
    const Tensor whole = layers::dropout(x, 0.4f, true, &whole_generator);
    std::vector<Tensor> parts;
    std::int64_t begin = 0;
    for (const std::int64_t size : {3, 2, 2}) {
      Generator part_generator(42);
      parts.push_back(
          layers::dropout_of_part(slice(x, begin, begin + size, d), 0.4f, true, d, begin, 7, &part_generator));
      CHECK(part_generator.offset() == whole_generator.offset());
      begin += size;
    }
    CAPTURE(dim);
    CHECK(all_close(concat(parts, d), whole, 0, 0));
  }
  CHECK(throws_error_mentioning(
      [] {
        layers::dropout_of_part(ones({2, 3}), 0.5f, true, 1, 5, 7);
      },
      {"dropout_of_part", "3", "from 5", "7"}));
}

TEST_CASE("dropout rejects a rate below 0 or at least 1") {
  CHECK(throws_error_mentioning([] { layers::Dropout(-0.1f); }, {"Dropout", "-0.1"}));
  CHECK(throws_error_mentioning([] { layers::dropout(ones({2}), 1.0f, true); }, {"dropout", "1"}));
}

TEST_CASE("dropout gradient matches finite differences for a fixed mask") {
  Generator data(6);
  const Tensor x = test::uniform_tensor({7, 13}, data);
  // A fresh generator with the same seed in every evaluation: the same mask.
  CHECK(test::gradcheck(
      [](const std::vector<Tensor>& t) {
        Generator mask(9);
        return layers::dropout(t[0], 0.3f, true, &mask);
      },
      {x}));
}
