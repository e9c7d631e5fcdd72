// Shape: extents up to rank 6, row-major strides, dim normalisation and
// NumPy broadcasting (core/shape.hpp).
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

TEST_CASE("Shape: ranks 0 to 6 are accepted with their extents and element counts") {
  CHECK(Shape{}.rank() == 0);
  CHECK(Shape{}.numel() == 1);
  const Shape six{2, 1, 3, 1, 5, 7};
  CHECK(six.rank() == Shape::kMaxDims);
  CHECK(six.numel() == 210);
  CHECK(six.to_vector() == std::vector<std::int64_t>{2, 1, 3, 1, 5, 7});
  CHECK(Shape{4, 0, 3}.numel() == 0);
}

TEST_CASE("Shape: rank 7 throws naming the rank and the maximum") {
  CHECK(throws_error_mentioning([] { Shape{1, 2, 3, 4, 5, 6, 7}; }, {"Shape", "rank 7", "6"}));
}

TEST_CASE("Shape: a negative extent throws") {
  CHECK(throws_error_mentioning([] { Shape{2, -1}; }, {"Shape", "-1"}));
}

TEST_CASE("Shape: strides are row-major in elements") {
  const auto strides = Shape{2, 3, 5}.strides();
  CHECK(strides[0] == 15);
  CHECK(strides[1] == 5);
  CHECK(strides[2] == 1);
}

TEST_CASE("Shape: normalize_dim resolves negative dims and rejects out-of-range ones") {
  const Shape shape{2, 3, 5};
  CHECK(shape.normalize_dim(-1, "op") == 2);
  CHECK(shape.normalize_dim(-3, "op") == 0);
  CHECK(shape.normalize_dim(1, "op") == 1);
  CHECK(throws_error_mentioning([&] { shape.normalize_dim(3, "myop"); }, {"myop", "dim 3", "[2, 3, 5]"}));
  CHECK(throws_error_mentioning([&] { shape.normalize_dim(-4, "myop"); }, {"myop", "dim -4", "[2, 3, 5]"}));
}

TEST_CASE("Shape: prints as a bracketed list and compares by rank and extents") {
  CHECK(Shape{2, 3}.str() == "[2, 3]");
  CHECK(Shape{}.str() == "[]");
  CHECK(Shape{2, 3} == Shape{2, 3});
  CHECK(Shape{2, 3} != Shape{3, 2});
  CHECK(Shape{6} != Shape{6, 1});
}

TEST_CASE("broadcast_shapes: aligns trailing dims and stretches ones") {
  CHECK(broadcast_shapes({4, 3}, {3}, "op") == Shape{4, 3});
  CHECK(broadcast_shapes({2, 3, 5, 7}, {3, 1, 1}, "op") == Shape{2, 3, 5, 7});
  CHECK(broadcast_shapes({5, 1}, {1, 4}, "op") == Shape{5, 4});
  CHECK(broadcast_shapes({}, {2, 3}, "op") == Shape{2, 3});
  CHECK(broadcast_shapes({1}, {2, 3}, "op") == Shape{2, 3});
}

TEST_CASE("broadcast_shapes: incompatible extents throw naming the op and both shapes") {
  CHECK(throws_error_mentioning([] { broadcast_shapes({4, 3}, {4}, "myop"); }, {"myop", "[4, 3]", "[4]"}));
}
