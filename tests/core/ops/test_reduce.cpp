// Reductions and broadcasting helpers (core/ops/reduce.cpp): sum, mean,
// max and argmax over everything or along each dim, with and without
// keepdim, against reference loops; their gradients; sum_to and expand.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <random>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {

// The lanes of `shape` along `dim` by plain index arithmetic: element k of
// lane (o, i) sits at (o * n + k) * inner + i.
struct ReferenceLanes {
  std::int64_t outer = 1, n = 1, inner = 1;
  ReferenceLanes(const Shape& shape, int dim) {
    for (int d = 0; d < dim; ++d) outer *= shape[d];
    n = shape[dim];
    for (int d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  }
  std::size_t at(std::int64_t o, std::int64_t k, std::int64_t i) const {
    return static_cast<std::size_t>((o * n + k) * inner + i);
  }
};

std::vector<float> reference_sum(const std::vector<float>& x, const Shape& shape, int dim) {
  const ReferenceLanes lanes(shape, dim);
  std::vector<float> out;
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    for (std::int64_t i = 0; i < lanes.inner; ++i) {
      double total = 0.0;
      for (std::int64_t k = 0; k < lanes.n; ++k) total += x[lanes.at(o, k, i)];
      out.push_back(static_cast<float>(total));
    }
  }
  return out;
}

struct ReferenceMax {
  std::vector<float> values;
  std::vector<std::int64_t> indices;
};

ReferenceMax reference_max(const std::vector<float>& x, const Shape& shape, int dim) {
  const ReferenceLanes lanes(shape, dim);
  ReferenceMax out;
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    for (std::int64_t i = 0; i < lanes.inner; ++i) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < lanes.n; ++k) {
        if (x[lanes.at(o, k, i)] > x[lanes.at(o, best, i)]) best = k;
      }
      out.values.push_back(x[lanes.at(o, best, i)]);
      out.indices.push_back(best);
    }
  }
  return out;
}

Shape reduced(const Shape& shape, int dim, bool keepdim) {
  std::vector<std::int64_t> dims = shape.to_vector();
  if (keepdim) {
    dims[static_cast<std::size_t>(dim)] = 1;
  } else {
    dims.erase(dims.begin() + dim);
  }
  return Shape(dims);
}

// Runs check(x, values, shape, dim, keepdim) over random tensors of rank 1
// to 4 (awkward extents), every dim, with and without keepdim.
template <class Check>
void for_each_reduction(std::uint64_t seed, const Check& check) {
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  Generator generator(seed);
  for (int rank = 1; rank <= 4; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 1000);
    const Tensor x = test::uniform_tensor(shape, generator);
    const std::vector<float> values = x.to_vector<float>();
    for (int dim = 0; dim < rank; ++dim) {
      for (const bool keepdim : {false, true}) {
        CAPTURE(shape);
        CAPTURE(dim);
        CAPTURE(keepdim);
        check(x, values, shape, dim, keepdim);
      }
    }
  }
}

}  // namespace

TEST_CASE("sum: over all elements equals a double-precision loop and is 0-d") {
  Generator generator(301);
  const Tensor x = test::uniform_tensor({13, 7, 3}, generator);
  double expected = 0.0;
  for (const float v : x.to_vector<float>()) expected += v;
  const Tensor s = sum(x);
  CHECK(s.shape() == Shape{});
  CHECK(s.item() == static_cast<float>(expected));
}

TEST_CASE("mean: over all elements is the sum divided by the count") {
  Generator generator(302);
  const Tensor x = test::uniform_tensor({7, 5}, generator);
  double expected = 0.0;
  for (const float v : x.to_vector<float>()) expected += v;
  CHECK(mean(x).item() == doctest::Approx(expected / 35.0).epsilon(1e-6));
}

TEST_CASE("sum and mean: along each dim, with and without keepdim, match reference loops") {
  for_each_reduction(303, [](const Tensor& x, const std::vector<float>& values, const Shape& shape, int dim,
                             bool keepdim) {
    const std::vector<float> expected = reference_sum(values, shape, dim);
    const Tensor s = sum(x, dim, keepdim);
    CHECK(s.shape() == reduced(shape, dim, keepdim));
    CHECK(all_close(s, expected, 0.0, 0.0));
    std::vector<float> expected_mean;
    for (const float v : expected) expected_mean.push_back(v / static_cast<float>(shape[dim]));
    const Tensor m = mean(x, dim - shape.rank(), keepdim);  // negative dims count from the end
    CHECK(m.shape() == reduced(shape, dim, keepdim));
    CHECK(all_close(m, expected_mean, 1e-7, 1e-6));
  });
}

TEST_CASE("sum: over an empty dim gives zeros") {
  const Tensor empty = zeros({4096, 0});
  {
    // Leave freed blocks of the result's size full of non-zeros, so output
    // the op forgot to write shows up.
    std::vector<Tensor> junk;
    for (int i = 0; i < 8; ++i) junk.push_back(full({4096}, 123.0));
  }
  const Tensor s = sum(empty, 1);
  CHECK(s.shape() == Shape{4096});
  CHECK(all_close(s, std::vector<float>(4096, 0.0f), 0.0, 0.0));
  CHECK(all_close(sum(zeros({2, 0, 3}), 1, true), std::vector<float>(6, 0.0f), 0.0, 0.0));
  CHECK(sum(zeros({0, 4})).item() == 0.0f);
}

TEST_CASE("mean: of an empty tensor or along an empty dim throws naming the shape") {
  CHECK(throws_error_mentioning([] { mean(zeros({0, 3})); }, {"mean", "[0, 3]"}));
  CHECK(throws_error_mentioning([] { mean(zeros({3, 0}), 1); }, {"mean", "[3, 0]"}));
}

TEST_CASE("max and argmax: along each dim, with and without keepdim, match reference loops") {
  for_each_reduction(304, [](const Tensor& x, const std::vector<float>& values, const Shape& shape, int dim,
                             bool keepdim) {
    const ReferenceMax expected = reference_max(values, shape, dim);
    const MaxResult result = max(x, dim, keepdim);
    CHECK(result.values.shape() == reduced(shape, dim, keepdim));
    CHECK(result.indices.shape() == reduced(shape, dim, keepdim));
    CHECK(result.indices.dtype() == DType::Int64);
    CHECK(result.values.to_vector<float>() == expected.values);
    CHECK(result.indices.to_vector<std::int64_t>() == expected.indices);
    CHECK(argmax(x, dim, keepdim).to_vector<std::int64_t>() == expected.indices);
  });
}

TEST_CASE("max: ties resolve to the first position, as in NumPy") {
  const Tensor x = from_vector(std::vector<float>{1, 3, 3, 2, 5, 5, 5, 0}, {2, 4});
  CHECK(argmax(x, 1).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0});
}

TEST_CASE("max: the gradient goes to the arg max only") {
  const Tensor x = from_vector(std::vector<float>{1, 4, 2, 7, 3, 0}, {2, 3}, TensorOptions{}.with_requires_grad());
  sum(max(x, 1).values * 2.0f).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0, 2, 0, 2, 0, 0});
}

TEST_CASE("argmax: records no graph and returns int64 indices") {
  const Tensor x = ones({2, 3}, TensorOptions{}.with_requires_grad());
  const Tensor i = argmax(x, 0);
  CHECK(i.dtype() == DType::Int64);
  CHECK_FALSE(i.requires_grad());
}

TEST_CASE("sum and mean: gradients over all elements match finite differences") {
  std::mt19937 rng(305);
  Generator generator(305);
  for (int rank = 0; rank <= 3; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 150);
    CAPTURE(shape);
    const Tensor x = test::uniform_tensor(shape, generator);
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]); }, {x}));
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return mean(in[0]); }, {x}));
    // Composed with a nonlinearity so the gradient differs per element.
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return sum(in[0] * in[0]) * mean(exp(in[0])); }, {x}));
  }
}

TEST_CASE("sum and mean: gradients along each dim, with and without keepdim, match finite differences") {
  std::mt19937 rng(306);
  Generator generator(306);
  for (int rank = 1; rank <= 4; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 120);
    const Tensor x = test::uniform_tensor(shape, generator);
    for (int dim = 0; dim < rank; ++dim) {
      for (const bool keepdim : {false, true}) {
        CAPTURE(shape);
        CAPTURE(dim);
        CAPTURE(keepdim);
        CHECK(gradcheck([&](const std::vector<Tensor>& in) { return sum(in[0], dim, keepdim); }, {x}));
        CHECK(gradcheck([&](const std::vector<Tensor>& in) { return mean(in[0], dim, keepdim); }, {x}));
      }
    }
  }
}

TEST_CASE("max: gradients along each dim, with and without keepdim, match finite differences") {
  std::mt19937 rng(307);
  for (int rank = 1; rank <= 4; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 120);
    // Distinct values 0.1 apart: no ties, and the step cannot move the max.
    const Tensor x = test::distinct_tensor(shape, rng);
    for (int dim = 0; dim < rank; ++dim) {
      for (const bool keepdim : {false, true}) {
        CAPTURE(shape);
        CAPTURE(dim);
        CAPTURE(keepdim);
        CHECK(gradcheck([&](const std::vector<Tensor>& in) { return max(in[0], dim, keepdim).values; }, {x}));
      }
    }
  }
}

TEST_CASE("expand: copies a tensor broadcast to a larger shape") {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3, 1});
  const Tensor y = expand(x, {2, 3, 4});
  CHECK(y.shape() == Shape{2, 3, 4});
  const std::vector<float> ones_out(24, 0.0f);
  CHECK(all_close(y,
                  test::reference_broadcast(x.to_vector<float>(), x.shape(), ones_out, y.shape(), y.shape(),
                                            [](float a, float) { return a; }),
                  0.0, 0.0));
}

TEST_CASE("sum_to: sums a broadcast result back to the operand's shape") {
  const Tensor x = arange(24).reshape({2, 3, 4});
  CHECK(sum_to(x, {3, 4}).to_vector<float>() == sum(x, 0).to_vector<float>());
  CHECK(sum_to(x, {3, 1}).to_vector<float>() == sum(sum(x, 0), 1, true).to_vector<float>());
  CHECK(sum_to(x, {}).item() == sum(x).item());
  CHECK(sum_to(x, {2, 3, 4}).same(x));
}

TEST_CASE("expand and sum_to: gradients match finite differences") {
  std::mt19937 rng(308);
  Generator generator(308);
  for (int trial = 0; trial < 3; ++trial) {
    const std::int64_t a = test::awkward_size(rng), b = test::awkward_size(rng), c = test::awkward_size(rng);
    CAPTURE(a);
    CAPTURE(b);
    CAPTURE(c);
    const Tensor small = test::uniform_tensor({b, 1}, generator);
    const Tensor large = test::uniform_tensor({a, b, c}, generator);
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return expand(in[0], {a, b, c}); }, {small}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return sum_to(in[0], {b, 1}); }, {large}));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return sum_to(in[0], {c}); }, {large}));
  }
}

TEST_CASE("reductions: a dim out of range throws naming the op, the dim and the shape") {
  const Tensor x = zeros({2, 3});
  CHECK(throws_error_mentioning([&] { sum(x, 2); }, {"sum", "dim 2", "[2, 3]"}));
  CHECK(throws_error_mentioning([&] { sum(x, -3); }, {"sum", "dim -3", "[2, 3]"}));
  CHECK(throws_error_mentioning([&] { mean(x, 5); }, {"mean", "dim 5", "[2, 3]"}));
  CHECK(throws_error_mentioning([&] { max(x, 2); }, {"max", "dim 2", "[2, 3]"}));
  CHECK(throws_error_mentioning([&] { argmax(x, -4); }, {"max", "dim -4", "[2, 3]"}));
}

TEST_CASE("max: along an empty dim throws naming the shape") {
  CHECK(throws_error_mentioning([] { max(zeros({3, 0}), 1); }, {"max", "[3, 0]"}));
}

TEST_CASE("reductions: an integer tensor throws naming the op and dtype") {
  const Tensor i = arange(4, TensorOptions{}.with_dtype(DType::Int64));
  CHECK(throws_error_mentioning([&] { sum(i); }, {"sum", "int64", "[4]"}));
  CHECK(throws_error_mentioning([&] { mean(i, 0); }, {"mean", "int64", "[4]"}));
  CHECK(throws_error_mentioning([&] { max(i, 0); }, {"max", "int64", "[4]"}));
}

TEST_CASE("sum_to and expand: shapes that are not broadcasts throw naming both shapes") {
  CHECK(throws_error_mentioning([] { sum_to(zeros({2, 3}), {4}); }, {"sum_to", "[2, 3]", "[4]"}));
  CHECK(throws_error_mentioning([] { expand(zeros({2, 3}), {4, 3}); }, {"expand", "[2, 3]", "[4, 3]"}));
}
