// The autograd engine (core/autograd.hpp): recording, reverse topological
// traversal with accumulation, freeing the graph, grad mode, detach, hooks
// and the errors of backward().
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <cmath>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::throws_error_mentioning;

namespace {

Tensor leaf(const std::vector<float>& values) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())}, TensorOptions{}.with_requires_grad());
}

// The identity, recorded as a node that counts how often backward runs it.
Tensor counting_identity(const Tensor& x, int& calls) {
  Tensor y;
  {
    const NoGradGuard no_grad;
    y = x.clone();
  }
  autograd::record(std::make_shared<autograd::FunctionNode>("CountingIdentity",
                                                            [&calls](const Tensor& g) {
                                                              ++calls;
                                                              return std::vector{g};
                                                            }),
                   {&x}, y);
  return y;
}

// x [rows, in], an output's gradient g [rows, out] and a weight [in, out]
// that requires grad: the operands of a Dense layer's weight gradient.
struct RandomProduct {
  Tensor x, g, weight;
};
RandomProduct random_product(std::int64_t rows, std::int64_t in, std::int64_t out, Generator& generator) {
  RandomProduct product{ddl::test::uniform_tensor({rows, in}, generator),
                        ddl::test::uniform_tensor({rows, out}, generator),
                        ddl::test::uniform_tensor({in, out}, generator)};
  product.weight.set_requires_grad(true);
  return product;
}

}  // namespace

TEST_CASE("autograd: ops on inputs that require grad record a named node") {
  const Tensor x = leaf({1, 2});
  const Tensor y = x * 2.0f;
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "MulScalarBackward");
  CHECK(exp(x).grad_fn()->name() == "ExpBackward");
}

TEST_CASE("autograd: ops on inputs that need no grad record nothing") {
  const Tensor y = ones({2}) * 2.0f;
  CHECK_FALSE(y.requires_grad());
  CHECK(y.grad_fn() == nullptr);
}

TEST_CASE("backward: a tensor used on two paths (diamond) gets the sum of both gradients") {
  const std::vector<float> values{-1.0f, 0.5f, 2.0f};
  const Tensor x = leaf(values);
  // y = sum(2x * exp(x)): dy/dx = 2 exp(x) (1 + x).
  sum((x * 2.0f) * exp(x)).backward();
  std::vector<float> expected;
  for (const float v : values) expected.push_back(2.0f * std::exp(v) * (1.0f + v));
  CHECK(all_close(x.grad(), expected));
}

TEST_CASE("backward: an op with the same tensor as both operands accumulates") {
  const Tensor x = leaf({1, -2, 3});
  sum(x * x).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, -4, 6});
}

TEST_CASE("backward: visits each node once, after all of its consumers") {
  const std::vector<float> values{0.5f, -1.0f};
  const Tensor x = leaf(values);
  int calls = 0;
  const Tensor u = counting_identity(x, calls);
  // u feeds three consumers; it must run once, with their summed gradient.
  sum(u * u + u * 3.0f + exp(u)).backward();
  CHECK(calls == 1);
  std::vector<float> expected;
  for (const float v : values) expected.push_back(2.0f * v + 3.0f + std::exp(v));
  CHECK(all_close(x.grad(), expected));
}

TEST_CASE("backward: a leaf's gradient is written once per backward, summed over its uses") {
  const Tensor x = leaf({1, 2});
  int hook_calls = 0;
  x.register_grad_hook([&](Tensor&) { ++hook_calls; });
  sum(x * x + x + exp(x)).backward();
  CHECK(hook_calls == 1);
}

TEST_CASE("backward: without retain_graph a second backward through the graph throws") {
  const Tensor x = leaf({1, 2});
  const Tensor y = sum(exp(x));
  y.backward();
  CHECK(throws_error_mentioning([&] { y.backward(); }, {"backward", "already freed", "retain_graph"}));
}

TEST_CASE("backward: without retain_graph the tensors saved for backward are freed") {
  const Tensor x = ones({1000}, TensorOptions{}.with_requires_grad());
  const Tensor y = sum(exp(x));  // ExpBackward holds exp(x): 4000 bytes
  const std::size_t before = memory_stats(cpu()).bytes_in_use;
  y.backward();
  // x.grad (4000 bytes) was allocated; exp(x) (4000 bytes) was freed.
  CHECK(memory_stats(cpu()).bytes_in_use == before);
}

TEST_CASE("backward: with retain_graph a second backward works and gradients accumulate") {
  const Tensor x = leaf({1, -2});
  const Tensor y = sum(x * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, -4});
  y.backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{4, -8});
}

TEST_CASE("backward: gradients of separate graphs accumulate into .grad") {
  const Tensor x = leaf({1, 2});
  sum(x * 3.0f).backward();
  sum(x * x).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{5, 7});
}

TEST_CASE("backward: only leaves that require grad get a .grad") {
  const Tensor x = leaf({1, 2});
  const Tensor constant = from_vector(std::vector<float>{3, 4}, {2});
  const Tensor middle = x * constant;
  sum(middle).backward();
  CHECK(x.grad().defined());
  CHECK_FALSE(constant.grad().defined());
  CHECK_FALSE(middle.grad().defined());
}

TEST_CASE("backward: a scalar leaf's gradient with respect to itself is one") {
  const Tensor x = full({}, 2.0, TensorOptions{}.with_requires_grad());
  x.backward();
  CHECK(x.grad().item() == 1.0f);
}

TEST_CASE("backward: an explicit upstream gradient seeds a non-scalar output") {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, TensorOptions{}.with_requires_grad());
  const Tensor upstream = from_vector(std::vector<float>{1, -1, 2, -2, 0.5f, 0}, {2, 3});
  (x * 3.0f).backward(upstream);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, -3, 6, -6, 1.5f, 0});
}

TEST_CASE("backward: a non-scalar output without an explicit gradient throws naming its shape") {
  const Tensor x = ones({2, 3}, TensorOptions{}.with_requires_grad());
  CHECK(throws_error_mentioning([&] { (x * 2.0f).backward(); }, {"backward", "non-scalar", "[2, 3]"}));
}

TEST_CASE("backward: an upstream gradient of the wrong shape throws naming both shapes") {
  const Tensor x = ones({2, 3}, TensorOptions{}.with_requires_grad());
  CHECK(throws_error_mentioning([&] { (x * 2.0f).backward(ones({3, 2})); }, {"backward", "[3, 2]", "[2, 3]"}));
}

TEST_CASE("backward: a tensor that does not require grad throws") {
  CHECK(throws_error_mentioning([] { sum(ones({2})).backward(); }, {"backward", "does not require grad"}));
}

TEST_CASE("NoGradGuard: ops inside it record nothing, and it restores grad mode") {
  const Tensor x = leaf({1, 2});
  CHECK(grad_enabled());
  {
    const NoGradGuard no_grad;
    CHECK_FALSE(grad_enabled());
    const Tensor y = exp(x) * 2.0f;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    {
      const NoGradGuard nested;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled());
  }
  CHECK(grad_enabled());
  CHECK((x * 2.0f).requires_grad());
}

TEST_CASE("detach: cuts the graph, so no gradient flows through the detached use") {
  const std::vector<float> values{1.5f, -2.0f};
  const Tensor x = leaf(values);
  // d/dx sum(stop(x) * x) = stop(x) = x.
  sum(x.detach() * x).backward();
  CHECK(x.grad().to_vector<float>() == values);
}

TEST_CASE("zero_grad: drops .grad so the next backward starts from zero") {
  const Tensor x = leaf({1, 2});
  sum(x * x).backward();
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(x * 3.0f).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("register_grad_hook: runs after .grad is updated and sees the accumulated value") {
  const Tensor x = leaf({1, 2});
  std::vector<std::vector<float>> seen;
  x.register_grad_hook([&](Tensor& t) { seen.push_back(t.grad().to_vector<float>()); });
  sum(x * x).backward();             // .grad = 2x = {2, 4}
  sum(x * x * 3.0f + x).backward();  // .grad += 6x + 1 = {9, 17}
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<float>{2, 4});
  CHECK(seen[1] == std::vector<float>{9, 17});
  CHECK(x.grad().to_vector<float>() == seen[1]);
}

TEST_CASE("register_grad_hook: the hook receives the leaf itself") {
  const Tensor x = leaf({1});
  bool same = false;
  x.register_grad_hook([&](Tensor& t) { same = t.same(x); });
  sum(x * 2.0f).backward();
  CHECK(same);
}

TEST_CASE("register_grad_hook: only leaves that require grad accept hooks") {
  const Tensor x = leaf({1, 2});
  CHECK(throws_error_mentioning([&] { (x * 2.0f).register_grad_hook([](Tensor&) {}); }, {"register_grad_hook"}));
  CHECK(throws_error_mentioning([] { ones({2}).register_grad_hook([](Tensor&) {}); }, {"register_grad_hook"}));
}

TEST_CASE("set_requires_grad: a non-leaf cannot change requires_grad and the error names its node") {
  const Tensor x = leaf({1, 2});
  Tensor y = exp(x);
  CHECK(throws_error_mentioning([&] { y.set_requires_grad(false); }, {"set_requires_grad", "ExpBackward", "detach"}));
}

TEST_CASE("autograd: the graph does not keep a leaf alive, and backward skips a leaf that is gone") {
  Tensor x = ones({1000}, TensorOptions{}.with_requires_grad());
  const Tensor y = sum(x * 2.0f);  // saves no tensor, only x's accumulator
  const std::size_t before = memory_stats(cpu()).bytes_in_use;
  x = Tensor();
  CHECK(memory_stats(cpu()).bytes_in_use == before - 4000);
  CHECK_NOTHROW(y.backward());
}

TEST_CASE("set_grad: a gradient of another shape throws naming both shapes") {
  const Tensor x = leaf({1, 2});
  CHECK(throws_error_mentioning([&] { x.set_grad(ones({3})); }, {"set_grad", "[3]", "[2]"}));
  x.set_grad(full({2}, 5.0));
  sum(x).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{6, 6});
}

TEST_CASE(
    "backward: a weight's product is added straight into a .grad viewing a bucket, without a temporary of "
    "its size, and its hooks run once") {
  Generator generator(41);
  // 7 rows: a product Eigen computes; 40: past the small-product threshold,
  // one oneDNN computes in tiles (core/cpu/gemm_cpu.cpp).
  for (const std::int64_t rows : {7, 40}) {
    CAPTURE(rows);
    const std::int64_t in = 300, out = 200;
    // Named references, not a structured binding: clang 14 lets no lambda capture one.
    const RandomProduct operands = random_product(rows, in, out, generator);
    const Tensor &x = operands.x, &g = operands.g, &weight = operands.weight;
    matmul(x, weight).backward(g);  // no .grad yet: the product becomes it
    const std::vector<float> product = weight.grad().to_vector<float>();
    weight.zero_grad();

    // A gradient bucket: the weight's .grad a view into a larger buffer.
    const Tensor bucket = zeros({in * out + 8});
    weight.set_grad(bucket.flat_slice(4, weight.shape()));
    int hooks = 0;
    weight.register_grad_hook([&](Tensor&) { ++hooks; });
    const std::size_t before = memory_stats(cpu()).bytes_in_use;
    reset_peak_memory_stats(cpu());
    matmul(x, weight).backward(g);
    CHECK(hooks == 1);
    const std::size_t product_bytes = static_cast<std::size_t>(in * out) * sizeof(float);
    CHECK(memory_stats(cpu()).peak_bytes - before < product_bytes);
    const std::vector<float> buffer = bucket.to_vector<float>();
    CHECK(std::vector<float>(buffer.begin() + 4, buffer.end() - 4) == product);  // zeros plus it, bit for bit
    CHECK(std::vector<float>(buffer.begin(), buffer.begin() + 4) == std::vector<float>(4, 0.0f));
    CHECK(std::vector<float>(buffer.end() - 4, buffer.end()) == std::vector<float>(4, 0.0f));

    // A weight used twice: its accumulator gets the engine's sum once, as
    // without a .grad (its hooks once too).
    const Tensor x2 = ddl::test::uniform_tensor({rows, in}, generator);
    const auto twice = [&] { return sum(matmul(x, weight) * g) + sum(matmul(x2, weight) * g); };
    weight.zero_grad();
    twice().backward();
    const std::vector<float> sum_of_uses = weight.grad().to_vector<float>();
    weight.set_grad(zeros({in * out + 8}).flat_slice(4, weight.shape()));
    hooks = 0;
    twice().backward();
    CHECK(hooks == 1);
    CHECK(weight.grad().to_vector<float>() == sum_of_uses);
  }
}

TEST_CASE(
    "backward: a weight's product added into a .grad that holds an earlier sum, over more rows than one of "
    "the GEMM's depth blocks, is within float32's bound of the float64 sum") {
  Generator generator(42);
  const std::int64_t rows = 700, out = 30;
  for (const std::int64_t in : {40, 60}) {  // 60: past the small-product threshold (oneDNN's tiles)
    CAPTURE(in);
    const auto [x, g, weight] = random_product(rows, in, out, generator);
    const Tensor earlier = ddl::test::uniform_tensor({in, out}, generator);
    weight.set_grad(earlier.clone());
    matmul(x, weight).backward(g);
    const std::vector<float> before = earlier.to_vector<float>();
    std::vector<double> expected(before.begin(), before.end()), magnitude(before.size());
    for (std::size_t k = 0; k < before.size(); ++k) magnitude[k] = std::abs(expected[k]);
    ddl::test::add_weight_gradient_reference(x, g, expected, magnitude);
    double worst = 0.0;
    const bool within = ddl::test::within_dot_product_bound(weight.grad(), expected, magnitude, rows + 1, &worst);
    CAPTURE(worst);
    CHECK(within);
  }
}
