// Tensor (core/tensor.hpp): shapes and dtypes, views that share data,
// copies between devices, host access, printing, and the gradients of the
// tensor methods (reshape, flatten, clone, to). ctest runs this suite with
// DDL_CPU_DEVICES=2.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <random>
#include <sstream>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {
void require_two_cpu_devices() {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
}
}  // namespace

TEST_CASE("Tensor: empty has the requested shape, dtype, device and byte size") {
  const Tensor t = Tensor::empty({2, 3, 5}, {DType::Int64, cpu(0), false});
  CHECK(t.defined());
  CHECK(t.shape() == Shape{2, 3, 5});
  CHECK(t.dim() == 3);
  CHECK(t.size(1) == 3);
  CHECK(t.size(-1) == 5);
  CHECK(t.numel() == 30);
  CHECK(t.dtype() == DType::Int64);
  CHECK(t.device() == cpu(0));
  CHECK(t.nbytes() == 240);
  CHECK_FALSE(t.requires_grad());
  CHECK(t.is_leaf());
}

TEST_CASE("Tensor: a default-constructed tensor is undefined and using it throws") {
  const Tensor t;
  CHECK_FALSE(t.defined());
  CHECK(throws_error_mentioning([&] { (void)t.shape(); }, {"undefined"}));
  CHECK(t.str() == "Tensor(undefined)");
}

TEST_CASE("Tensor: shapes up to rank 6 hold and reduce their elements") {
  const Tensor t = arange(2 * 1 * 3 * 1 * 2 * 5).reshape({2, 1, 3, 1, 2, 5});
  CHECK(t.dim() == 6);
  CHECK(t.at({1, 0, 2, 0, 1, 4}) == 59.0f);
  const Tensor s = sum(t, 5);
  CHECK(s.shape() == Shape{2, 1, 3, 1, 2});
  CHECK(s.at({0, 0, 0, 0, 0}) == 0.0f + 1 + 2 + 3 + 4);
  CHECK(sum(t).item() == 59.0f * 60.0f / 2.0f);
}

TEST_CASE("Tensor: copies of a handle share the same data") {
  Tensor a = zeros({3});
  Tensor b = a;
  b.data<float>()[1] = 7.0f;
  CHECK(a.to_vector<float>() == std::vector<float>{0.0f, 7.0f, 0.0f});
  CHECK(a.same(b));
}

TEST_CASE("Tensor: reshape shares data, so writes through one show in the other") {
  const Tensor a = arange(6);
  const Tensor b = a.reshape({2, 3});
  CHECK(b.shape() == Shape{2, 3});
  CHECK(b.raw_data() == a.raw_data());
  b.data<float>()[4] = -1.0f;
  CHECK(a.to_vector<float>()[4] == -1.0f);
  a.data<float>()[0] = 42.0f;
  CHECK(b.at({0, 0}) == 42.0f);
}

TEST_CASE("Tensor: view is reshape and shares data") {
  const Tensor a = zeros({4, 3});
  const Tensor v = a.view({3, 4});
  v.data<float>()[11] = 5.0f;
  CHECK(a.at({3, 2}) == 5.0f);
}

TEST_CASE("Tensor: reshape to a different element count throws naming both shapes") {
  CHECK(throws_error_mentioning([] { zeros({2, 3}).reshape({4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"}));
}

TEST_CASE("Tensor: flatten merges the dims from start_dim to end_dim") {
  const Tensor t = zeros({2, 3, 5, 7});
  CHECK(t.flatten().shape() == Shape{210});
  CHECK(t.flatten(1).shape() == Shape{2, 105});
  CHECK(t.flatten(0, 1).shape() == Shape{6, 5, 7});
  CHECK(t.flatten(1, 2).shape() == Shape{2, 15, 7});
  CHECK(t.flatten(-2).shape() == Shape{2, 3, 35});
  CHECK(zeros({}).flatten().shape() == Shape{1});
  CHECK(t.flatten().raw_data() == t.raw_data());
}

TEST_CASE("Tensor: flat_slice views a range of elements in another shape, sharing memory and outliving its base") {
  Tensor slice;
  const MemoryStats before = memory_stats(cpu());
  {
    const Tensor base = arange(37);
    slice = base.flat_slice(11, {2, 3, 4});
    CHECK(slice.shape() == Shape{2, 3, 4});
    CHECK(slice.at({0, 0, 0}) == 11.0f);
    CHECK(slice.at({1, 2, 3}) == 34.0f);
    slice.data<float>()[5] = -2.0f;
    CHECK(base.to_vector<float>()[16] == -2.0f);
    CHECK(base.flat_slice(37, {0}).numel() == 0);
    CHECK(!slice.requires_grad());
  }
  // The base's memory stays held (and counted) while the slice lives.
  CHECK(memory_stats(cpu()).allocations == before.allocations + 1);
  CHECK(slice.at({1, 2, 3}) == 34.0f);
  slice = Tensor();
  CHECK(memory_stats(cpu()).allocations == before.allocations);
}

TEST_CASE("Tensor: flat_slice past the end throws naming the range and the shape") {
  CHECK(throws_error_mentioning([] { zeros({4, 5}).flat_slice(15, {2, 3}); }, {"flat_slice", "[15, 21)", "[4, 5]"}));
  CHECK(throws_error_mentioning([] { zeros({4}).flat_slice(-1, {2}); }, {"flat_slice", "[-1, 1)"}));
}

TEST_CASE("Tensor: flatten with start_dim after end_dim or out of range throws") {
  CHECK(throws_error_mentioning([] { zeros({2, 3, 5}).flatten(2, 1); }, {"flatten", "[2, 3, 5]"}));
  CHECK(throws_error_mentioning([] { zeros({2, 3, 5}).flatten(3); }, {"flatten", "dim 3", "[2, 3, 5]"}));
}

TEST_CASE("Tensor: to(cpu:1) makes a real copy with the same values") {
  require_two_cpu_devices();
  Generator generator(1);
  const Tensor a = uniform({13, 7}, -1.0f, 1.0f, {}, &generator);
  const Tensor b = a.to(cpu(1));
  CHECK(b.device() == cpu(1));
  CHECK(b.shape() == a.shape());
  CHECK(b.raw_data() != a.raw_data());
  CHECK(b.to_vector<float>() == a.to_vector<float>());
  a.data<float>()[0] = 100.0f;  // the copy is independent of the source
  CHECK(b.at({0, 0}) != 100.0f);
}

TEST_CASE("Tensor: to(cpu:1) copies int32 and int64 tensors too") {
  require_two_cpu_devices();
  const Tensor a = from_vector(std::vector<std::int64_t>{5, -6, 9000000000LL}, {3});
  const Tensor b = arange(4, TensorOptions{}.with_dtype(DType::Int32));
  CHECK(a.to(cpu(1)).to_vector<std::int64_t>() == a.to_vector<std::int64_t>());
  CHECK(b.to(cpu(1)).dtype() == DType::Int32);
  CHECK(b.to(cpu(1)).to(cpu(0)).to_vector<std::int32_t>() == b.to_vector<std::int32_t>());
}

TEST_CASE("Tensor: to(cpu:1) charges the bytes to cpu:1 until the copy dies") {
  require_two_cpu_devices();
  const Tensor a = ones({1000});
  const std::size_t before = memory_stats(cpu(1)).bytes_in_use;
  {
    const Tensor b = a.to(cpu(1));
    CHECK(memory_stats(cpu(1)).bytes_in_use == before + a.nbytes());
  }
  CHECK(memory_stats(cpu(1)).bytes_in_use == before);
}

TEST_CASE("Tensor: to the device it is already on returns the same tensor") {
  const Tensor a = ones({3});
  CHECK(a.to(cpu(0)).same(a));
}

TEST_CASE("Tensor: int32 and int64 tensors come from vectors and go back unchanged") {
  const std::vector<std::int32_t> small{-3, 0, 7, 2147483647};
  const std::vector<std::int64_t> large{-5, 9000000000LL, 1, 0, 42, -1};
  const Tensor a = from_vector(small, {2, 2});
  const Tensor b = from_vector(large, {3, 2});
  CHECK(a.dtype() == DType::Int32);
  CHECK(b.dtype() == DType::Int64);
  CHECK(a.to_vector<std::int32_t>() == small);
  CHECK(b.to_vector<std::int64_t>() == large);
  CHECK(b.reshape({6}).to_vector<std::int64_t>() == large);
  CHECK(from_vector(std::vector<std::int64_t>{9}, {1}).item<std::int64_t>() == 9);
}

TEST_CASE("Tensor: at() reads one element of a float tensor") {
  const Tensor t = arange(24).reshape({2, 3, 4});
  CHECK(t.at({0, 0, 0}) == 0.0f);
  CHECK(t.at({1, 2, 3}) == 23.0f);
  CHECK(t.at({1, 0, 2}) == 14.0f);
}

TEST_CASE("Tensor: at() with an index out of range throws naming the index, dim and shape") {
  const Tensor t = zeros({2, 3});
  CHECK(throws_error_mentioning([&] { t.at({0, 3}); }, {"at()", "index 3", "dim 1", "[2, 3]"}));
  CHECK(throws_error_mentioning([&] { t.at({-1, 0}); }, {"at()", "index -1", "dim 0", "[2, 3]"}));
  CHECK(throws_error_mentioning([&] { t.at({1}); }, {"at()", "1 indices", "[2, 3]"}));
}

TEST_CASE("Tensor: item() of a tensor with more than one element throws naming its shape") {
  CHECK(full({}, 2.5).item() == 2.5f);
  CHECK(throws_error_mentioning([] { zeros({2, 2}).item(); }, {"item()", "[2, 2]"}));
}

TEST_CASE("Tensor: typed access with the wrong element type throws naming both types") {
  const Tensor t = zeros({2});
  CHECK(throws_error_mentioning([&] { t.data<std::int32_t>(); }, {"data<int32>", "float32"}));
  CHECK(throws_error_mentioning([&] { t.to_vector<std::int64_t>(); }, {"to_vector<int64>", "float32"}));
}

TEST_CASE("Tensor: only float32 tensors can require grad") {
  CHECK(throws_error_mentioning([] { Tensor::empty({2}, {DType::Int64, cpu(), true}); }, {"int64"}));
  CHECK(throws_error_mentioning([] { zeros({2}, TensorOptions{}.with_dtype(DType::Int32)).set_requires_grad(); },
                                {"set_requires_grad", "int32"}));
  CHECK(ones({2}, TensorOptions{}.with_requires_grad()).requires_grad());
}

TEST_CASE("Tensor: clone copies data into new storage") {
  const Tensor a = arange(5);
  const Tensor b = a.clone();
  CHECK(b.raw_data() != a.raw_data());
  a.data<float>()[0] = 9.0f;
  CHECK(b.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
}

TEST_CASE("Tensor: detach shares data but is a leaf that does not require grad") {
  const Tensor x = ones({3}, TensorOptions{}.with_requires_grad());
  const Tensor y = x * 2.0f;
  const Tensor d = y.detach();
  CHECK(d.raw_data() == y.raw_data());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.grad_fn() == nullptr);
}

TEST_CASE("Tensor: printing shows shape, dtype, device and values") {
  std::ostringstream os;
  os << from_vector(std::vector<float>{1.5f, -2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  const std::string text = os.str();
  CHECK(text.find("shape=[2, 3]") != std::string::npos);
  CHECK(text.find("float32") != std::string::npos);
  CHECK(text.find("cpu:0") != std::string::npos);
  CHECK(text.find("1.5, -2, 3, 4, 5, 6") != std::string::npos);
}

TEST_CASE("Tensor: printing a long tensor shows its first values and the total count") {
  const std::string text = arange(100, TensorOptions{}.with_dtype(DType::Int64)).str();
  CHECK(text.find("shape=[100]") != std::string::npos);
  CHECK(text.find("int64") != std::string::npos);
  CHECK(text.find("0, 1, 2, 3, 4, 5, 6, 7, ...") != std::string::npos);
  CHECK(text.find("100 total") != std::string::npos);
  CHECK(text.find(", 8,") == std::string::npos);
}

TEST_CASE("Tensor: printing marks tensors that require grad") {
  CHECK(ones({2}, TensorOptions{}.with_requires_grad()).str().find("requires_grad") != std::string::npos);
  CHECK(ones({2}).str().find("requires_grad") == std::string::npos);
}

TEST_CASE("reshape: gradient matches finite differences for random shapes") {
  std::mt19937 rng(101);
  Generator generator(101);
  for (int trial = 0; trial < 4; ++trial) {
    const Shape from = test::random_shape(rng, 3);
    const Shape to{from[2], from[0] * from[1]};
    CAPTURE(from);
    const Tensor x = test::uniform_tensor(from, generator);
    // Multiplied by a non-constant so the check also sees where each
    // element went.
    const Tensor scale = test::uniform_tensor(to, generator);
    CHECK(gradcheck([&](const std::vector<Tensor>& in) { return in[0].reshape(to) * scale; }, {x}));
  }
}

TEST_CASE("flatten: gradient matches finite differences for random shapes") {
  std::mt19937 rng(102);
  Generator generator(102);
  for (int trial = 0; trial < 3; ++trial) {
    const Shape shape = test::random_shape(rng, 4);
    CAPTURE(shape);
    const Tensor x = test::uniform_tensor(shape, generator);
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return in[0].flatten(1, 2) * in[0].flatten(1, 2); }, {x}));
  }
}

TEST_CASE("clone: gradient matches finite differences") {
  std::mt19937 rng(103);
  Generator generator(103);
  const Shape shape = test::random_shape(rng, 2);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return exp(in[0].clone()); },
                  {test::uniform_tensor(shape, generator)}));
}

TEST_CASE("to: gradient flows back across devices to the source device") {
  require_two_cpu_devices();
  Generator generator(104);
  const Tensor x = test::uniform_tensor({3, 7}, generator);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return tanh(in[0].to(cpu(1))); }, {x}));

  Tensor leaf = x.clone().set_requires_grad();
  sum(leaf.to(cpu(1)) * 3.0f).backward();
  REQUIRE(leaf.grad().defined());
  CHECK(leaf.grad().device() == cpu(0));
  CHECK(test::all_close(leaf.grad(), full({3, 7}, 3.0)));
}

TEST_CASE("Tensor: move_into keeps the values in a part of another buffer, for every handle") {
  const Tensor weight = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  const Tensor handle = weight;  // a second handle follows too
  const Tensor flat = zeros({10});
  weight.move_into(flat.flat_slice(3, {6}));
  CHECK(flat.to_vector<float>() == std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6, 0});
  CHECK(weight.shape() == Shape{2, 3});
  CHECK(weight.requires_grad());
  flat.flat_slice(3, {6}).copy_from(from_vector(std::vector<float>{9, 8, 7, 6, 5, 4}, {6}));
  CHECK(handle.to_vector<float>() == std::vector<float>{9, 8, 7, 6, 5, 4});
  CHECK(throws_error_mentioning([&] { weight.move_into(flat.flat_slice(0, {5})); }, {"move_into", "[2, 3]", "[5]"}));
}
