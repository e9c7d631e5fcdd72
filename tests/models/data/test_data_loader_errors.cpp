// DataLoader errors: each bad dataset, option, shard, sampler or call order
// is a ddl::Error that names what was wrong.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/models/data/data_loader.hpp>

#include "models/data/loader_test_data.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::models;
using ddl::test::indexed_dataset;
using ddl::test::throws_error_mentioning;

namespace {

// Gives a fixed list whatever the data set size or epoch.
struct FixedSampler : models::Sampler {
  explicit FixedSampler(std::vector<std::int64_t> order) : order(std::move(order)) {}
  std::vector<std::int64_t> indices(std::int64_t, std::int64_t) const override { return order; }
  std::vector<std::int64_t> order;
};

// One more index every epoch: a length the loader cannot plan for.
struct GrowingSampler : models::Sampler {
  std::vector<std::int64_t> indices(std::int64_t, std::int64_t epoch) const override {
    return std::vector<std::int64_t>(static_cast<std::size_t>(epoch + 1), 0);
  }
};

}  // namespace

TEST_CASE("DataLoader: batch_size 0 is an error naming the value") {
  CHECK(throws_error_mentioning([] { DataLoader(indexed_dataset(5), {.batch_size = 0}); }, {"batch_size", "0"}));
}

TEST_CASE("DataLoader: a negative prefetch is an error naming the value") {
  CHECK(throws_error_mentioning([] { DataLoader(indexed_dataset(5), {.prefetch = -1}); }, {"prefetch", "-1"}));
}

TEST_CASE("DataLoader: inputs and targets with different sample counts is an error naming both shapes") {
  const Dataset data{zeros({37, 3}), arange(36, TensorOptions{}.with_dtype(DType::Int64))};
  CHECK(throws_error_mentioning([&] { DataLoader{data}; }, {"[37, 3]", "[36]", "number of samples"}));
}

TEST_CASE("DataLoader: integer inputs are an error naming the dtype") {
  const Dataset data{arange(4, TensorOptions{}.with_dtype(DType::Int32)), zeros({4})};
  CHECK(throws_error_mentioning([&] { DataLoader{data}; }, {"inputs must be float32", "int32"}));
}

TEST_CASE("DataLoader: an invalid shard is an error naming rank and world") {
  DataLoader loader(indexed_dataset(5));
  CHECK(throws_error_mentioning([&] { loader.begin_epoch(0, {2, 2}); }, {"rank 2 of world 2"}));
  CHECK(throws_error_mentioning([&] { loader.begin_epoch(0, {-1, 2}); }, {"rank -1 of world 2"}));
  CHECK(throws_error_mentioning([&] { loader.samples_per_epoch({0, 0}); }, {"rank 0 of world 0"}));
}

TEST_CASE("DataLoader: next before begin_epoch is an error saying so") {
  DataLoader loader(indexed_dataset(5));
  CHECK(throws_error_mentioning([&] { loader.next(); }, {"next", "begin_epoch"}));
}

TEST_CASE("DataLoader: a normalisation that does not broadcast to one sample is an error naming both shapes") {
  const Normalization wrong{zeros({4}), ones({4})};
  CHECK(throws_error_mentioning(
      [&] {
        DataLoader(indexed_dataset(5, {2, 3}), {.normalization = wrong});
      },
      {"mean", "[4]", "[2, 3]"}));
  const Normalization too_many_dims{zeros({1, 1, 3}), ones({1, 1, 3})};
  CHECK(throws_error_mentioning([&] { DataLoader(indexed_dataset(5, {3}), {.normalization = too_many_dims}); },
                                {"[1, 1, 3]", "[3]"}));
}

TEST_CASE("DataLoader: a stddev that is not positive is an error naming the value") {
  const Normalization zero_stddev{zeros({3}), from_vector({1.0f, 0.0f, 2.0f}, {3})};
  CHECK(throws_error_mentioning([&] { DataLoader(indexed_dataset(5, {3}), {.normalization = zero_stddev}); },
                                {"stddev", "> 0", "got 0"}));
}

TEST_CASE("DataLoader: a sampler index outside the data set is an error naming it") {
  const auto sampler = std::make_shared<FixedSampler>(std::vector<std::int64_t>{0, 5, 1});
  CHECK(throws_error_mentioning([&] { DataLoader(indexed_dataset(5), {.sampler = sampler}); }, {"index 5", "[0, 5)"}));
}

TEST_CASE("DataLoader: a sampler whose length changes between epochs is an error") {
  DataLoader loader(indexed_dataset(5), {.sampler = std::make_shared<GrowingSampler>()});
  CHECK(throws_error_mentioning([&] { loader.begin_epoch(1); }, {"2 indices for epoch 1", "1 for epoch 0"}));
}

TEST_CASE("DataLoader: a device that does not exist is an error naming it") {
  CHECK(throws_error_mentioning([] { DataLoader(indexed_dataset(5), {.device = cpu(99)}); }, {"cpu:99"}));
}
