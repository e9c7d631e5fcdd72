// SequentialSampler and RandomSampler (models/data/sampler.cpp): permutations that
// are pure functions of (seed, epoch, n), different every epoch.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include <ddl/ddl.hpp>
#include <ddl/models/data/sampler.hpp>

using namespace ddl;
using namespace ddl::models;

namespace {

bool is_permutation_of_range(std::vector<std::int64_t> order, std::int64_t n) {
  std::vector<std::int64_t> range(static_cast<std::size_t>(n));
  std::iota(range.begin(), range.end(), std::int64_t{0});
  std::sort(order.begin(), order.end());
  return order == range;
}

}  // namespace

TEST_CASE("SequentialSampler: gives 0..n-1 in every epoch") {
  const SequentialSampler sampler;
  CHECK(sampler.indices(4, 0) == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(sampler.indices(4, 7) == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(sampler.indices(0, 0).empty());
}

TEST_CASE("RandomSampler: every epoch is a permutation of 0..n-1") {
  const RandomSampler sampler(123);
  for (const std::int64_t n : {0, 1, 2, 3, 37, 1000}) {
    for (std::int64_t epoch = 0; epoch < 4; ++epoch) {
      CAPTURE(n);
      CAPTURE(epoch);
      CHECK(is_permutation_of_range(sampler.indices(n, epoch), n));
    }
  }
}

TEST_CASE("RandomSampler: the order is a pure function of seed, epoch and n") {
  const RandomSampler a(5);
  const RandomSampler b(5);
  const std::vector<std::int64_t> epoch_3 = a.indices(37, 3);
  CHECK(a.indices(37, 1) != epoch_3);
  CHECK(b.indices(37, 3) == epoch_3);
  CHECK(a.indices(37, 3) == epoch_3);
  CHECK(RandomSampler(6).indices(37, 3) != epoch_3);
}

TEST_CASE("RandomSampler: a fixed seed gives a fixed order on every machine") {
  // Pinned so that a change of algorithm, which would change every resumed
  // run's data order, cannot pass unnoticed.
  CHECK(RandomSampler(42).indices(10, 0) == std::vector<std::int64_t>{4, 3, 0, 6, 2, 9, 7, 1, 5, 8});
  CHECK(RandomSampler(42).indices(10, 1) == std::vector<std::int64_t>{5, 1, 9, 7, 4, 2, 8, 0, 6, 3});
}

TEST_CASE("RandomSampler: all orders of 4 samples are about equally likely") {
  // 24 orders over 4800 epochs: about 200 each; a fair shuffle stays within
  // 200 +- 60 (over 4 standard deviations) for every order.
  const RandomSampler sampler(2024);
  std::map<std::vector<std::int64_t>, int> counts;
  for (std::int64_t epoch = 0; epoch < 4800; ++epoch) ++counts[sampler.indices(4, epoch)];
  CHECK(counts.size() == 24);
  for (const auto& [order, count] : counts) {
    CHECK(count > 140);
    CHECK(count < 260);
  }
}

TEST_CASE("RandomSampler: a negative epoch is an error naming it") {
  CHECK_THROWS_WITH_AS(RandomSampler(1).indices(5, -1), doctest::Contains("epoch must be in [0,"), Error);
}
