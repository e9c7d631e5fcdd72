// Elementwise ops (core/ops/elementwise.cpp): values against the C++ math
// library and a reference broadcast, gradients by finite differences for
// every op and every broadcasting pattern, and the errors for bad inputs.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {

struct BinaryOp {
  const char* name;
  Tensor (*op)(const Tensor&, const Tensor&);
  std::function<float(float, float)> reference;
};

const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops{
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, std::plus<float>()},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, std::minus<float>()},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, std::multiplies<float>()},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, std::divides<float>()},
  };
  return ops;
}

// Runs every binary op on operands of the given shapes: the values against
// the reference broadcast, the gradients of both operands by gradcheck.
// Both operands stay away from zero so div is smooth in either order.
void check_binary_ops(const Shape& a_shape, const Shape& b_shape, std::uint64_t seed) {
  Generator generator(seed);
  const Tensor a = test::away_from_zero_tensor(a_shape, generator);
  const Tensor b = test::away_from_zero_tensor(b_shape, generator);
  const Shape out_shape = broadcast_shapes(a_shape, b_shape, "test");
  for (const BinaryOp& op : binary_ops()) {
    INFO("op: ", op.name);
    CAPTURE(a_shape);
    CAPTURE(b_shape);
    const Tensor y = op.op(a, b);
    CHECK(y.shape() == out_shape);
    CHECK(all_close(y, test::reference_broadcast(a.to_vector<float>(), a_shape, b.to_vector<float>(), b_shape,
                                                 out_shape, op.reference)));
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return op.op(in[0], in[1]); }, {a, b}));
    // The mirrored order broadcasts the left operand instead.
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return op.op(in[1], in[0]); }, {a, b}));
  }
}

struct UnaryOp {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;
  enum Domain { kAny, kPositive, kAwayFromZero } domain;
};

const std::vector<UnaryOp>& unary_ops() {
  static const std::vector<UnaryOp> ops{
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, UnaryOp::kAny},
      {"operator-", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, UnaryOp::kAny},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, UnaryOp::kAny},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, UnaryOp::kPositive},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, UnaryOp::kPositive},
      {"pow 2", [](const Tensor& x) { return pow(x, 2.0f); }, [](double x) { return x * x; }, UnaryOp::kAny},
      {"pow 3", [](const Tensor& x) { return pow(x, 3.0f); }, [](double x) { return x * x * x; }, UnaryOp::kAny},
      {"pow 0.5", [](const Tensor& x) { return pow(x, 0.5f); }, [](double x) { return std::sqrt(x); },
       UnaryOp::kPositive},
      {"pow -1.5", [](const Tensor& x) { return pow(x, -1.5f); }, [](double x) { return std::pow(x, -1.5); },
       UnaryOp::kPositive},
      {"pow 1.7", [](const Tensor& x) { return pow(x, 1.7f); }, [](double x) { return std::pow(x, 1.7); },
       UnaryOp::kPositive},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; },
       UnaryOp::kAwayFromZero},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); }, UnaryOp::kAwayFromZero},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
       UnaryOp::kAny},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, UnaryOp::kAny},
      {"add scalar", [](const Tensor& x) { return add(x, 2.5f); }, [](double x) { return x + 2.5; }, UnaryOp::kAny},
      {"mul scalar", [](const Tensor& x) { return mul(x, -1.5f); }, [](double x) { return x * -1.5; }, UnaryOp::kAny},
      {"tensor + float", [](const Tensor& x) { return x + 0.25f; }, [](double x) { return x + 0.25; }, UnaryOp::kAny},
      {"tensor - float", [](const Tensor& x) { return x - 0.75f; }, [](double x) { return x - 0.75; }, UnaryOp::kAny},
      {"tensor * float", [](const Tensor& x) { return x * 3.0f; }, [](double x) { return x * 3.0; }, UnaryOp::kAny},
      {"tensor / float", [](const Tensor& x) { return x / 4.0f; }, [](double x) { return x / 4.0; }, UnaryOp::kAny},
      {"float * tensor", [](const Tensor& x) { return 0.5f * x; }, [](double x) { return 0.5 * x; }, UnaryOp::kAny},
  };
  return ops;
}

Tensor input_for(UnaryOp::Domain domain, const Shape& shape, Generator& generator) {
  switch (domain) {
    case UnaryOp::kPositive:
      return test::positive_tensor(shape, generator);
    case UnaryOp::kAwayFromZero:
      return test::away_from_zero_tensor(shape, generator);
    case UnaryOp::kAny:
      break;
  }
  return test::uniform_tensor(shape, generator, -2.0f, 2.0f);
}

}  // namespace

TEST_CASE("unary ops: values match the C++ math library on random data") {
  Generator generator(201);
  for (const UnaryOp& op : unary_ops()) {
    INFO("op: ", op.name);
    const Tensor x = input_for(op.domain, {1000}, generator);
    std::vector<float> expected;
    for (const float v : x.to_vector<float>()) expected.push_back(static_cast<float>(op.reference(v)));
    // A few ulps: the float functions are within 1-2 ulp of the double ones.
    CHECK(all_close(op.op(x), expected, 1e-6, 1e-6));
  }
}

TEST_CASE("unary ops: gradients match finite differences for random shapes") {
  std::mt19937 rng(202);
  Generator generator(202);
  for (const UnaryOp& op : unary_ops()) {
    INFO("op: ", op.name);
    for (int rank = 0; rank <= 3; ++rank) {
      const Shape shape = test::random_shape(rng, rank, 100);
      CAPTURE(shape);
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return op.op(in[0]); },
                      {input_for(op.domain, shape, generator)}));
    }
  }
}

TEST_CASE("sigmoid: saturates without overflow for large inputs") {
  const Tensor y = sigmoid(from_vector(std::vector<float>{-200.0f, -90.0f, 0.0f, 90.0f, 200.0f}, {5}));
  const std::vector<float> values = y.to_vector<float>();
  CHECK(values[0] == 0.0f);
  CHECK(values[1] >= 0.0f);
  CHECK(values[1] < 1e-30f);
  CHECK(values[2] == 0.5f);
  CHECK(values[3] == 1.0f);
  CHECK(values[4] == 1.0f);
}

TEST_CASE("sigmoid and tanh: saturated and tiny inputs are within float32's own error of the exact values") {
  // Saturated inputs (|x| up to 100, results down to 1e-44) and tiny ones
  // (tanh x = x): a relative error of an expf or tanhf plus a division.
  std::mt19937 rng(206);
  std::vector<float> x;
  for (const float magnitude : {1e-30f, 1e-6f, 1.0f, 10.0f, 30.0f, 60.0f, 100.0f}) {
    std::uniform_real_distribution<float> near(0.5f * magnitude, magnitude);
    for (int i = 0; i < 50; ++i) x.push_back(i % 2 == 0 ? near(rng) : -near(rng));
  }
  std::vector<float> sigmoid_exact, tanh_exact;
  for (const float v : x) {
    sigmoid_exact.push_back(static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v)))));
    tanh_exact.push_back(static_cast<float>(std::tanh(static_cast<double>(v))));
  }
  const Tensor input = from_vector(x, {static_cast<std::int64_t>(x.size())});
  const double tiny = std::numeric_limits<float>::denorm_min(), eps = std::numeric_limits<float>::epsilon();
  CHECK(all_close(sigmoid(input), sigmoid_exact, tiny, 2 * eps));
  CHECK(all_close(tanh(input), tanh_exact, tiny, 2 * eps));
}

TEST_CASE("relu: the gradient is zero for negative inputs and at zero, one for positive inputs") {
  const Tensor x = from_vector(std::vector<float>{-1.0f, 0.0f, 2.0f}, {3}, TensorOptions{}.with_requires_grad());
  sum(relu(x)).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0.0f, 0.0f, 1.0f});
}

TEST_CASE("relu: NaN passes through, infinities clamp as numbers do, and the gradient at NaN is zero") {
  // As PyTorch's and TensorFlow's: a diverged value must reach the loss.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Tensor x = from_vector(std::vector<float>{nan, -inf, inf, -nan}, {4}, TensorOptions{}.with_requires_grad());
  const std::vector<float> y = relu(x).to_vector<float>();
  CHECK(std::isnan(y[0]));
  CHECK(y[1] == 0.0f);
  CHECK(y[2] == inf);
  CHECK(std::isnan(y[3]));
  sum(relu(x)).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0.0f, 0.0f, 1.0f, 0.0f});
}

TEST_CASE("relu: keeps its output for backward, so that its input is freed, and the gradient is unchanged") {
  // A pre-activation nothing else keeps (mul by a scalar keeps nothing):
  // after the forward pass only x and relu's output are held.
  Generator generator(178);
  const Tensor x = test::uniform_tensor({1000}, generator).set_requires_grad();
  const std::size_t before = memory_stats(cpu()).bytes_in_use;
  const Tensor y = relu(x * 2.0f);
  CHECK(memory_stats(cpu()).bytes_in_use - before == 1000 * sizeof(float));
  sum(y).backward();
  const std::vector<float> xs = x.to_vector<float>(), grad = x.grad().to_vector<float>();
  for (std::size_t i = 0; i < xs.size(); ++i) CHECK(grad[i] == (xs[i] > 0.0f ? 2.0f : 0.0f));
}

TEST_CASE("abs: the gradient is the sign of the input, and zero at zero") {
  const Tensor x = from_vector(std::vector<float>{-2.0f, 0.0f, 3.0f}, {3}, TensorOptions{}.with_requires_grad());
  sum(abs(x)).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{-1.0f, 0.0f, 1.0f});
}

TEST_CASE("binary ops: same-shape operands match the reference and gradcheck") {
  std::mt19937 rng(204);
  for (int rank = 1; rank <= 4; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 100);
    check_binary_ops(shape, shape, 204 + static_cast<std::uint64_t>(rank));
  }
}

TEST_CASE("binary ops: bias-style broadcast [N, C] with [C]") {
  std::mt19937 rng(205);
  for (int trial = 0; trial < 3; ++trial) {
    const std::int64_t n = test::awkward_size(rng), c = test::awkward_size(rng);
    check_binary_ops({n, c}, {c}, 205 + static_cast<std::uint64_t>(trial));
  }
}

TEST_CASE("binary ops: per-channel broadcast [N, C, H, W] with [C, 1, 1]") {
  std::mt19937 rng(206);
  for (int trial = 0; trial < 2; ++trial) {
    const Shape x = test::random_shape(rng, 4, 150);
    check_binary_ops(x, {x[1], 1, 1}, 206 + static_cast<std::uint64_t>(trial));
  }
}

TEST_CASE("binary ops: a 0-d scalar operand broadcasts to any shape") {
  std::mt19937 rng(207);
  check_binary_ops(test::random_shape(rng, 2), Shape{}, 207);
  check_binary_ops(test::random_shape(rng, 3), Shape{}, 208);
}

TEST_CASE("binary ops: a one-element [1] operand broadcasts to any shape") {
  std::mt19937 rng(209);
  check_binary_ops(test::random_shape(rng, 2), Shape{1}, 209);
  check_binary_ops(test::random_shape(rng, 3), Shape{1, 1}, 210);
}

TEST_CASE("binary ops: both operands broadcast, [N, 1] with [1, C] and [A, 1, B] with [C, 1]") {
  std::mt19937 rng(211);
  const std::int64_t n = test::awkward_size(rng), c = test::awkward_size(rng), a = test::awkward_size(rng);
  check_binary_ops({n, 1}, {1, c}, 211);
  check_binary_ops({a, 1, 5}, {c, 1}, 212);
  check_binary_ops({7}, {3, 1}, 213);
}

TEST_CASE("binary ops: the arithmetic operators are add, sub, mul and div") {
  Generator generator(214);
  const Tensor a = test::uniform_tensor({3, 5}, generator);
  const Tensor b = test::away_from_zero_tensor({5}, generator);
  CHECK((a + b).to_vector<float>() == add(a, b).to_vector<float>());
  CHECK((a - b).to_vector<float>() == sub(a, b).to_vector<float>());
  CHECK((a * b).to_vector<float>() == mul(a, b).to_vector<float>());
  CHECK((a / b).to_vector<float>() == div(a, b).to_vector<float>());
}

TEST_CASE("binary ops: shapes that do not broadcast throw naming the op and both shapes") {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  for (const BinaryOp& op : binary_ops()) {
    INFO("op: ", op.name);
    CHECK(throws_error_mentioning([&] { op.op(a, b); }, {op.name, "[2, 3]", "[4]", "broadcast"}));
  }
}

TEST_CASE("binary ops: operands on two devices throw naming the op and both devices") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  const Tensor a = zeros({2, 3}), b = zeros({2, 3}, TensorOptions{}.with_device(cpu(1)));
  for (const BinaryOp& op : binary_ops()) {
    INFO("op: ", op.name);
    CHECK(throws_error_mentioning([&] { op.op(a, b); }, {op.name, "cpu:0", "cpu:1", "[2, 3]"}));
  }
}

TEST_CASE("elementwise ops: an integer tensor where float32 is required throws naming the op and dtype") {
  const Tensor i64 = arange(3, TensorOptions{}.with_dtype(DType::Int64));
  const Tensor i32 = arange(3, TensorOptions{}.with_dtype(DType::Int32));
  CHECK(throws_error_mentioning([&] { exp(i64); }, {"exp", "int64", "[3]"}));
  CHECK(throws_error_mentioning([&] { log(i32); }, {"log", "int32", "[3]"}));
  CHECK(throws_error_mentioning([&] { relu(i64); }, {"relu", "int64"}));
  CHECK(throws_error_mentioning([&] { abs(i32); }, {"abs", "int32"}));
  CHECK(throws_error_mentioning([&] { neg(i64); }, {"neg", "int64"}));
  CHECK(throws_error_mentioning([&] { pow(i64, 2.0f); }, {"pow", "int64"}));
  CHECK(throws_error_mentioning([&] { mul(i64, 2.0f); }, {"mul", "int64"}));
  CHECK(throws_error_mentioning([&] { add(i32, ones({3})); }, {"add", "int32", "[3]"}));
  CHECK(throws_error_mentioning([&] { div(ones({3}), i64); }, {"div", "int64", "[3]"}));
}
