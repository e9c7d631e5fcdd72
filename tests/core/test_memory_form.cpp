// Tensors stored in another order than row-major (core/memory_form.hpp),
// on a form of the test's own, the elements back to front: data() and
// every other reader see row-major order, once and for every handle and
// view; the pointwise maps keep the form, binary ones where both operands
// share it; and only memory a storage owns whole may take a form.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include "support/test_data.hpp"

#include <algorithm>
#include <memory>
#include <vector>

using namespace ddl;

namespace {

// Element i of n stored at n - 1 - i.
class Reversed final : public MemoryForm {
 public:
  explicit Reversed(std::int64_t n) : n_(n) {}
  std::size_t bytes() const override { return static_cast<std::size_t>(n_) * sizeof(float); }
  void to_row_major(const void* from, void* to) const override {
    const auto* in = static_cast<const float*>(from);
    std::reverse_copy(in, in + n_, static_cast<float*>(to));
  }
  bool same_as(const MemoryForm& other) const override {
    const auto* reversed = dynamic_cast<const Reversed*>(&other);
    return reversed != nullptr && reversed->n_ == n_;
  }

 private:
  std::int64_t n_;
};

// A tensor holding `values` stored back to front, marked as such.
Tensor reversed_tensor(const std::vector<float>& values, const Shape& shape) {
  const Tensor t = Tensor::empty(shape);
  std::reverse_copy(values.begin(), values.end(), static_cast<float*>(t.stored_data()));
  t.set_stored_form(std::make_shared<Reversed>(t.numel()));
  return t;
}

std::vector<float> values_of(std::int64_t n, unsigned seed) {
  Generator generator(seed);
  return test::uniform_tensor({n}, generator).to_vector<float>();
}

}  // namespace

TEST_CASE("a tensor in another form reads row-major, once, through every handle and view") {
  const std::vector<float> values = values_of(2 * 3 * 5 * 7, 1);
  const Tensor t = reversed_tensor(values, {2, 3, 5, 7});
  const Tensor view = t.reshape({6, 35});
  const Tensor handle = t;  // NOLINT(performance-unnecessary-copy-initialization): a second handle
  REQUIRE(t.stored_form() != nullptr);
  CHECK(view.stored_form() != nullptr);  // one storage, one form
  CHECK(view.to_vector<float>() == values);
  CHECK(t.stored_form() == nullptr);
  CHECK(handle.stored_form() == nullptr);
  CHECK(t.to_vector<float>() == values);
  CHECK(t.at({1, 2, 4, 6}) == values.back());
}

TEST_CASE("a tensor in another form: a part of it, a copy of it, a sum over it read row-major") {
  const std::vector<float> values = values_of(4 * 9, 2);
  const auto fresh = [&] { return reversed_tensor(values, {4, 9}); };
  CHECK(fresh().flat_slice(9, {9}).to_vector<float>() == std::vector<float>(values.begin() + 9, values.begin() + 18));
  CHECK(fresh().clone().to_vector<float>() == values);
  const std::vector<float> row_sums = sum(fresh(), 1).to_vector<float>();
  const std::vector<float> expected = sum(from_vector(values, {4, 9}), 1).to_vector<float>();
  CHECK(row_sums == expected);
}

TEST_CASE("the pointwise maps keep a tensor's form, and a pair keeps it only where both share it") {
  const std::vector<float> a_values = values_of(3 * 16, 3), b_values = values_of(3 * 16, 4);
  const Shape shape{3, 16};
  const Tensor row_major_a = from_vector(a_values, shape), row_major_b = from_vector(b_values, shape);

  const Tensor y = relu(reversed_tensor(a_values, shape));
  CHECK(y.stored_form() != nullptr);
  CHECK(y.to_vector<float>() == relu(row_major_a).to_vector<float>());

  const Tensor both = sub(reversed_tensor(a_values, shape), reversed_tensor(b_values, shape));
  CHECK(both.stored_form() != nullptr);
  CHECK(both.to_vector<float>() == sub(row_major_a, row_major_b).to_vector<float>());

  const Tensor mixed = sub(reversed_tensor(a_values, shape), row_major_b);
  CHECK(mixed.stored_form() == nullptr);
  CHECK(mixed.to_vector<float>() == sub(row_major_a, row_major_b).to_vector<float>());

  // Broadcasting pairs elements by position: row-major, whatever the forms.
  const Tensor bias = from_vector(std::vector<float>(b_values.begin(), b_values.begin() + 16), {16});
  const Tensor broadcast = add(reversed_tensor(a_values, shape), bias);
  CHECK(broadcast.stored_form() == nullptr);
  CHECK(broadcast.to_vector<float>() == add(row_major_a, bias).to_vector<float>());
}

TEST_CASE("the gradient through a ReLU in another form is the same as through a row-major one") {
  const std::vector<float> x_values = values_of(5 * 16, 5), g_values = values_of(5 * 16, 6);
  const Shape shape{5, 16};
  const auto grad_of = [&](const Tensor& x, const Tensor& g) {
    const Tensor leaf = x.detach().set_requires_grad();
    relu(mul(leaf, 1.0f)).backward(g);
    return leaf.grad().to_vector<float>();
  };
  CHECK(grad_of(reversed_tensor(x_values, shape), reversed_tensor(g_values, shape)) ==
        grad_of(from_vector(x_values, shape), from_vector(g_values, shape)));
}

TEST_CASE("only a storage that owns all of its memory takes a form, and one of its size") {
  const Tensor whole = zeros({8});
  const Tensor part = whole.flat_slice(2, {4});
  CHECK_THROWS_WITH_AS(part.set_stored_form(std::make_shared<Reversed>(4)),
                       doctest::Contains("only a CPU storage that owns all of its memory takes a form"), Error);
  // The whole storage has a part pointing into its bytes, which putting
  // them in row-major order would move.
  CHECK_THROWS_AS(whole.set_stored_form(std::make_shared<Reversed>(8)), Error);
  CHECK(whole.stored_form() == nullptr);
  // A form of another size than the storage's.
  CHECK_THROWS_WITH_AS(zeros({8}).set_stored_form(std::make_shared<Reversed>(9)),
                       doctest::Contains("a form of 36 bytes for a storage of 32"), Error);
}
