// Tensor creation (core/ops/creation.cpp): constants, ranges and host
// vectors in every dtype, on any device, with requires_grad as asked.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

TEST_CASE("zeros, ones and full: fill float32, int32 and int64 tensors") {
  CHECK(zeros({2, 3}).to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(ones({4}).to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(full({3}, -2.5).to_vector<float>() == std::vector<float>(3, -2.5f));
  CHECK(full({2, 2}, 7, TensorOptions{}.with_dtype(DType::Int32)).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>(4, 7));
  CHECK(full({3}, 3e9, TensorOptions{}.with_dtype(DType::Int64)).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>(3, 3000000000LL));
  CHECK(zeros({2}, TensorOptions{}.with_dtype(DType::Int64)).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>(2, 0));
  CHECK(ones({2}, TensorOptions{}.with_dtype(DType::Int32)).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>(2, 1));
}

TEST_CASE("zeros_like and ones_like: copy shape, dtype and device but not requires_grad") {
  const Tensor like = full({2, 5}, 3.0, TensorOptions{}.with_requires_grad());
  const Tensor z = zeros_like(like), o = ones_like(like);
  CHECK(z.shape() == like.shape());
  CHECK(o.dtype() == DType::Float32);
  CHECK_FALSE(z.requires_grad());
  CHECK(o.to_vector<float>() == std::vector<float>(10, 1.0f));
  CHECK(ones_like(arange(3, TensorOptions{}.with_dtype(DType::Int64))).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>(3, 1));
}

TEST_CASE("arange: counts 0 to n-1 in each dtype") {
  CHECK(arange(5).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(arange(4, TensorOptions{}.with_dtype(DType::Int32)).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(arange(3, TensorOptions{}.with_dtype(DType::Int64)).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{0, 1, 2});
  CHECK(arange(0).numel() == 0);
  // Large enough for the parallel loop.
  const std::vector<std::int64_t> big =
      arange(100000, TensorOptions{}.with_dtype(DType::Int64)).to_vector<std::int64_t>();
  CHECK(big[99999] == 99999);
}

TEST_CASE("arange: a negative count throws") {
  CHECK(throws_error_mentioning([] { arange(-1); }, {"arange", "-1"}));
}

TEST_CASE("from_vector: a value count that does not fill the shape throws naming both") {
  CHECK(throws_error_mentioning(
      [] {
        from_vector(std::vector<float>{1, 2, 3}, {2, 2});
      },
      {"from_vector", "3 values", "[2, 2]"}));
  CHECK(throws_error_mentioning([] { from_vector(std::vector<std::int64_t>{1}, {2}); }, {"from_vector", "[2]"}));
}

TEST_CASE("creation: options choose the device and requires_grad") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  const TensorOptions on_cpu1 = TensorOptions{}.with_device(cpu(1));
  CHECK(zeros({2}, on_cpu1).device() == cpu(1));
  CHECK(full({2}, 1.0, on_cpu1).device() == cpu(1));
  CHECK(arange(2, on_cpu1).device() == cpu(1));
  CHECK(from_vector(std::vector<float>{1, 2}, {2}, on_cpu1).to_vector<float>() == std::vector<float>{1, 2});
  CHECK(uniform({2}, 0.0f, 1.0f, on_cpu1).device() == cpu(1));
  CHECK(normal({2}, 0.0f, 1.0f, on_cpu1).device() == cpu(1));
  const Tensor leaf = zeros({2}, TensorOptions{}.with_requires_grad());
  CHECK(leaf.requires_grad());
  CHECK(leaf.is_leaf());
}

TEST_CASE("creation: requires_grad on an integer tensor throws") {
  CHECK(throws_error_mentioning([] { full({2}, 1.0, TensorOptions{}.with_dtype(DType::Int64).with_requires_grad()); },
                                {"int64"}));
  CHECK(throws_error_mentioning([] { arange(2, TensorOptions{}.with_dtype(DType::Int32).with_requires_grad()); },
                                {"int32"}));
}

TEST_CASE("creation: a device that does not exist throws naming it") {
  CHECK(throws_error_mentioning([] { zeros({2}, TensorOptions{}.with_device(cpu(64))); }, {"cpu:64"}));
}
