// Weights packed once for many products (core/packed_weights.hpp): inside
// a scope, x·W and x·Wᵀ of a weight it holds read one packed copy per
// orientation, and stay within float32's bound of the float64 product.
#include <doctest/doctest.h>

#include <ddl/core/packed_weights.hpp>
#include <ddl/ddl.hpp>

#include <cstdint>
#include <vector>

#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::product_reference;
using ddl::test::ProductReference;
using ddl::test::transposed;
using ddl::test::uniform_tensor;
using ddl::test::within_dot_product_bound;

namespace {

// Whether `actual` [m, n] is within float32's bound of the float64 product
// a [m, k] · op(b), op(b) = b [k, n], or bᵀ for b [n, k].
void check_product(const Tensor& actual, const Tensor& a, const Tensor& b, bool b_transposed) {
  const std::int64_t m = a.size(0), k = a.size(1), n = actual.size(1);
  const std::vector<float> bv = b_transposed ? transposed(b.to_vector<float>(), n, k) : b.to_vector<float>();
  const ProductReference expected = product_reference(a.to_vector<float>(), bv, m, k, n);
  double worst = 0.0;
  const bool within = within_dot_product_bound(actual, expected.value, expected.magnitude, k, &worst);
  CAPTURE(worst);
  CHECK(within);
}

Tensor weight_leaf(std::int64_t in, std::int64_t out, Generator& generator) {
  Tensor weight = uniform_tensor({in, out}, generator);
  weight.set_requires_grad(true);
  return weight;
}

// One micro-batch of `rows` through x·W and back: checks the output and
// the input's gradient g·Wᵀ against float64.
void forward_and_backward(std::int64_t rows, const Tensor& weight, Generator& generator) {
  Tensor x = uniform_tensor({rows, weight.size(0)}, generator);
  if (rows > 2) {  // extreme magnitudes beside ordinary ones, and a row of zeros
    x = x * concat({full({1, 1}, 1e15f), full({1, 1}, 0.0f), ones({rows - 2, 1})});
  }
  x.set_requires_grad(true);
  const Tensor y = matmul(x, weight);
  check_product(y, x.detach(), weight.detach(), false);
  const Tensor gradient = uniform_tensor(y.shape(), generator);
  y.backward(gradient);
  check_product(x.grad(), gradient, weight.detach(), true);
}

// The bytes a scope over `weight` packs for one micro-batch of `rows` (0
// where oneDNN reads the weight plain); the scope closes, leaving its copies
// to the next one on this thread.
std::size_t bytes_packed_by_a_step(const Tensor& weight, Generator& generator, std::int64_t rows) {
  const PackedWeights packed({weight});
  forward_and_backward(rows, weight, generator);
  return packed.bytes();
}

constexpr const char* kNothingToPack =
    "oneDNN reads this weight plain on this CPU (no AVX-512 brgemm): nothing to pack";

}  // namespace

TEST_CASE("packed weights: forward and input-gradient products within float32's bound of float64, any rows") {
  Generator generator(4101);
  // Awkward sizes: not multiples of any kernel block, a single row, and
  // micro-batches of differing row counts as an uneven cut makes.
  for (const auto& shape : {std::pair<std::int64_t, std::int64_t>{37, 70}, {130, 257}, {64, 5}}) {
    const std::int64_t in = shape.first, out = shape.second;  // CAPTURE's lambda takes no structured binding (clang)
    CAPTURE(in);
    CAPTURE(out);
    const Tensor weight = weight_leaf(in, out, generator);
    const PackedWeights packed({weight});
    for (const std::int64_t rows : {5, 17, 1, 16}) {
      CAPTURE(rows);
      forward_and_backward(rows, weight, generator);
    }
    // One copy per orientation at most, however many products read it.
    CHECK(packed.copies() <= 2);
  }
}

TEST_CASE("packed weights: each weight packed once per orientation, for every micro-batch of a batch") {
  Generator generator(4102);
  const std::int64_t in = 96, out = 200;
  const Tensor weight = weight_leaf(in, out, generator);
  const Tensor other = weight_leaf(out, 33, generator);  // a second layer
  const PackedWeights packed({weight, other});
  forward_and_backward(8, weight, generator);
  if (packed.copies() == 0) {
    return test::skip(kNothingToPack);
  }
  CHECK(packed.copies() == 2);  // x·W and g·Wᵀ
  const std::size_t one_weight = packed.bytes();
  CHECK(one_weight >= 2 * static_cast<std::size_t>(in * out) * sizeof(float));
  for (const std::int64_t rows : {8, 7, 9}) forward_and_backward(rows, weight, generator);
  CHECK(packed.copies() == 2);
  CHECK(packed.bytes() == one_weight);
  forward_and_backward(8, other, generator);
  CHECK(packed.copies() == 4);
}

TEST_CASE("packed weights: products of other operands, and after the scope closes, run as without it") {
  Generator generator(4103);
  const Tensor weight = uniform_tensor({48, 80}, generator), other = uniform_tensor({48, 80}, generator);
  const Tensor x = uniform_tensor({6, 48}, generator);
  const std::vector<float> plain = matmul(x, weight).to_vector<float>();
  const std::vector<float> plain_other = matmul(x, other).to_vector<float>();
  {
    const PackedWeights outer({weight});
    {
      const PackedWeights inner({other});
      check_product(matmul(x, other), x, other, false);
      // The outer scope still serves its weight while the inner one is open.
      check_product(matmul(x, weight), x, weight, false);
      CHECK(inner.copies() == outer.copies());
    }
    // The inner scope is closed: `other` is no weight of any scope.
    CHECK(matmul(x, other).to_vector<float>() == plain_other);
    // A product whose left operand is the weight is not packed.
    const Tensor left = matmul(transpose(weight), transpose(x));
    check_product(left, transpose(weight), transpose(x), false);
    CHECK(PackedWeights::holding(x.data<float>()) == nullptr);
    CHECK(PackedWeights::holding(weight.data<float>()) == &outer);
  }
  CHECK(PackedWeights::holding(weight.data<float>()) == nullptr);
  CHECK(matmul(x, weight).to_vector<float>() == plain);
}

TEST_CASE("packed weights: the next scope packs ahead what the last one packed, from the weight's new values") {
  Generator generator(4104);
  const Tensor weight = weight_leaf(72, 130, generator);
  const std::size_t first_bytes = bytes_packed_by_a_step(weight, generator, 6);
  if (first_bytes == 0) return test::skip(kNothingToPack);
  // An optimizer step between the scopes: the weight changes in place.
  {
    const NoGradGuard no_grad;
    weight.copy_from(weight * 0.5f + 0.25f);
  }
  PackedWeights next({weight});
  next.pack_ahead();
  CHECK(next.copies() == 2);
  CHECK(next.bytes() == first_bytes);
  // The products read the copies packed ahead, of the new values.
  forward_and_backward(9, weight, generator);
  CHECK(next.copies() == 2);
}

TEST_CASE("packed weights: packing ahead stops when the wait is over, and the products pack the rest") {
  Generator generator(4106);
  const Tensor weight = weight_leaf(72, 130, generator);
  const std::size_t first_bytes = bytes_packed_by_a_step(weight, generator, 6);
  if (first_bytes == 0) return test::skip(kNothingToPack);
  PackedWeights next({weight});
  REQUIRE(next.ahead());
  int asked = 0;
  next.pack_ahead([&] { return ++asked > 1; });  // the wait ends after one copy
  CHECK(next.copies() == 1);
  CHECK(next.ahead());
  next.pack_ahead([] { return true; });  // over before it began: nothing packed
  CHECK(next.copies() == 1);
  forward_and_backward(6, weight, generator);  // the other orientation, packed by its product
  CHECK(next.copies() == 2);
  CHECK(next.bytes() == first_bytes);
  CHECK_FALSE(next.ahead());
}

TEST_CASE("packed weights: a scope packs ahead only weights it holds, of the shape they were packed at") {
  Generator generator(4105);
  const Tensor weight = weight_leaf(40, 90, generator);
  if (bytes_packed_by_a_step(weight, generator, 5) == 0) return test::skip(kNothingToPack);
  // Another weight alone: the last scope's copies are not its own.
  const Tensor other = weight_leaf(40, 90, generator);
  {
    PackedWeights unrelated({other});
    unrelated.pack_ahead();
    CHECK(unrelated.copies() == 0);
  }
  // The last scope is now `unrelated`, which packed nothing.
  PackedWeights again({weight});
  again.pack_ahead();
  CHECK(again.copies() == 0);
  forward_and_backward(5, weight, generator);  // packed by the products themselves
  CHECK(again.copies() == 2);
}
