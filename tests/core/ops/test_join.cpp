// concat and slice along a dim (core/ops/join.cpp): values, gradients and
// the errors for ranges out of range or tensors that do not fit together.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <random>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

TEST_CASE("concat: stacks tensors along dim 0 in order") {
  Generator generator(601);
  const Tensor a = test::uniform_tensor({2, 3, 5}, generator);
  const Tensor b = test::uniform_tensor({1, 3, 5}, generator);
  const Tensor c = test::uniform_tensor({3, 3, 5}, generator);
  const Tensor y = concat({a, b, c});
  CHECK(y.shape() == Shape{6, 3, 5});
  std::vector<float> expected = a.to_vector<float>();
  for (const Tensor& t : {b, c}) {
    const std::vector<float> v = t.to_vector<float>();
    expected.insert(expected.end(), v.begin(), v.end());
  }
  CHECK(y.to_vector<float>() == expected);
}

TEST_CASE("concat: joins integer tensors and tensors with no rows") {
  const Tensor a = from_vector(std::vector<std::int64_t>{1, 2}, {1, 2});
  const Tensor empty = Tensor::empty({0, 2}, {DType::Int64, cpu(), false});
  const Tensor b = from_vector(std::vector<std::int64_t>{3, 4, 5, 6}, {2, 2});
  CHECK(concat({a, empty, b}).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("slice: takes the rows from start up to but excluding end along dim 0") {
  const Tensor x = arange(24).reshape({6, 4});
  const Tensor y = slice(x, 2, 5);
  CHECK(y.shape() == Shape{3, 4});
  std::vector<float> expected;
  for (int i = 8; i < 20; ++i) expected.push_back(static_cast<float>(i));
  CHECK(y.to_vector<float>() == expected);
  CHECK(slice(x, 3, 3).shape() == Shape{0, 4});
  CHECK(slice(x, 0, 6).to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("slice: makes a copy, not a view") {
  const Tensor x = arange(6).reshape({3, 2});
  const Tensor y = slice(x, 1, 2);
  x.data<float>()[2] = 100.0f;
  CHECK(y.to_vector<float>() == std::vector<float>{2, 3});
}

// Element [o, i, n] of a tensor seen as [outer, size(dim), inner], from its values.
struct AroundDim {
  std::vector<float> values;
  std::int64_t size, inner = 1;
  AroundDim(const Tensor& x, int dim) : values(x.to_vector<float>()), size(x.size(dim)) {
    for (int d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  }
  float at(std::int64_t o, std::int64_t i, std::int64_t n) const {
    return values[static_cast<std::size_t>((o * size + i) * inner + n)];
  }
};

TEST_CASE("concat and slice along a later dim: each element where the dim's index puts it") {
  std::mt19937 rng(604);
  Generator generator(604);
  for (const int dim : {1, 2, -1}) {
    const Shape shape({test::awkward_size(rng), 5, test::awkward_size(rng)});
    const int d = shape.normalize_dim(dim, "test");
    std::vector<std::int64_t> b_dims = shape.to_vector();
    b_dims[static_cast<std::size_t>(d)] = 3;
    const Tensor a = test::uniform_tensor(shape, generator), b = test::uniform_tensor(Shape(b_dims), generator);
    const Tensor joined = concat({a, b}, dim);
    CAPTURE(dim);
    CAPTURE(shape);
    const AroundDim in_a(a, d), in_b(b, d), in_joined(joined, d);
    const std::int64_t outer = d == 1 ? shape[0] : shape[0] * shape[1];
    bool all_placed = true;
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t n = 0; n < in_joined.inner; ++n) {
        for (std::int64_t i = 0; i < in_joined.size; ++i) {
          const float expected = i < in_a.size ? in_a.at(o, i, n) : in_b.at(o, i - in_a.size, n);
          all_placed = all_placed && in_joined.at(o, i, n) == expected;
        }
      }
    }
    CHECK(all_placed);
    CHECK(slice(joined, 0, a.size(d), dim).to_vector<float>() == a.to_vector<float>());
    CHECK(slice(joined, a.size(d), joined.size(d), dim).to_vector<float>() == b.to_vector<float>());
  }
}

TEST_CASE("concat and slice along a later dim: gradients match finite differences") {
  std::mt19937 rng(605);
  Generator generator(605);
  const Tensor x = test::uniform_tensor({3, test::awkward_size(rng) + 2, 4}, generator);
  const Tensor y = test::uniform_tensor({3, 2, 4}, generator);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return tanh(concat(in, 1)); }, {x, y}));
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return exp(slice(in[0], 1, 3, -2)); }, {x}));
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return exp(slice(in[0], 1, 2, 2)); }, {x}));
}

TEST_CASE("concat and slice along a later dim: integers, a dim out of range and a range out of it throw") {
  const Tensor ints = from_vector(std::vector<std::int64_t>{1, 2, 3, 4}, {2, 2});
  CHECK(throws_error_mentioning([&] { slice(ints, 0, 1, 1); }, {"slice", "float32", "int64"}));
  CHECK(throws_error_mentioning([&] { concat({ints, ints}, 1); }, {"concat", "float32", "int64"}));
  CHECK(throws_error_mentioning([] { slice(zeros({2, 3}), 0, 1, 2); }, {"slice"}));
  CHECK(throws_error_mentioning([] { slice(zeros({2, 3}), 1, 4, 1); }, {"slice", "[1, 4)", "dim 1", "[2, 3]"}));
  CHECK(throws_error_mentioning(
      [] {
        concat({zeros({2, 3}), zeros({3, 3})}, 1);
      },
      {"concat", "[2, 3]", "[3, 3]", "dim 1"}));
}

TEST_CASE("concat: gradients match finite differences for random row counts") {
  std::mt19937 rng(602);
  Generator generator(602);
  for (int trial = 0; trial < 3; ++trial) {
    const Shape row = test::random_shape(rng, 2, 30);
    std::vector<Tensor> parts;
    for (int i = 0; i < 3; ++i) {
      parts.push_back(test::uniform_tensor({test::awkward_size(rng), row[0], row[1]}, generator));
    }
    CAPTURE(row);
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return tanh(concat(in)); }, parts));
  }
}

TEST_CASE("slice: gradients match finite differences, with zeros outside the rows") {
  std::mt19937 rng(603);
  Generator generator(603);
  for (int trial = 0; trial < 4; ++trial) {
    const Shape shape = test::random_shape(rng, 3, 150);
    std::uniform_int_distribution<std::int64_t> pick(0, shape[0]);
    std::int64_t start = pick(rng), end = pick(rng);
    if (start > end) std::swap(start, end);
    CAPTURE(shape);
    CAPTURE(start);
    CAPTURE(end);
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return exp(slice(in[0], start, end)); },
                    {test::uniform_tensor(shape, generator)}));
  }
}

TEST_CASE("slice: rows out of range throw naming the op, the rows and the shape") {
  const Tensor x = zeros({4, 3});
  CHECK(throws_error_mentioning([&] { slice(x, 2, 5); }, {"slice", "[2, 5)", "[4, 3]"}));
  CHECK(throws_error_mentioning([&] { slice(x, -1, 2); }, {"slice", "[-1, 2)", "[4, 3]"}));
  CHECK(throws_error_mentioning([&] { slice(x, 3, 2); }, {"slice", "[3, 2)", "[4, 3]"}));
  CHECK(throws_error_mentioning([] { slice(zeros({}), 0, 0); }, {"slice", "1 dim"}));
}

TEST_CASE("concat: tensors that differ beyond dim 0 throw naming both shapes") {
  CHECK(throws_error_mentioning([] { concat({zeros({2, 3}), zeros({2, 4})}); }, {"concat", "[2, 3]", "[2, 4]"}));
  CHECK(throws_error_mentioning([] { concat({zeros({2, 3}), zeros({2, 3, 1})}); }, {"concat", "[2, 3]", "[2, 3, 1]"}));
}

TEST_CASE("concat: tensors of different dtypes or on different devices throw naming them") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  CHECK(throws_error_mentioning(
      [] {
        concat({zeros({2}), zeros({2}, TensorOptions{}.with_dtype(DType::Int32))});
      },
      {"concat", "int32", "float32"}));
  CHECK(throws_error_mentioning(
      [] {
        concat({zeros({2}), zeros({3}, TensorOptions{}.with_device(cpu(1)))});
      },
      {"concat", "cpu:0", "cpu:1", "[2]", "[3]"}));
}

TEST_CASE("concat: no tensors, or 0-d tensors, throw") {
  CHECK(throws_error_mentioning([] { concat({}); }, {"concat", "no tensors"}));
  CHECK(throws_error_mentioning([] { concat({zeros({}), zeros({})}); }, {"concat", "1 dim"}));
}
