// DataLoader (models/data/data_loader.cpp): batch counts and sizes, sample order
// and shuffling, prefetching, the device batches land on, and custom samplers.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include <ddl/ddl.hpp>
#include <ddl/models/data/data_loader.hpp>

#include "models/data/loader_test_data.hpp"
#include "support/skip.hpp"

using namespace ddl;
using namespace ddl::models;
using ddl::test::indexed_dataset;
using ddl::test::indices_of;
using ddl::test::read_epoch;

namespace {

std::vector<std::int64_t> iota_vector(std::int64_t n) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), std::int64_t{0});
  return values;
}

std::vector<std::int64_t> sorted(std::vector<std::int64_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

// Reverses the samples and remembers nothing: a Sampler must be stateless.
struct ReverseSampler : models::Sampler {
  std::vector<std::int64_t> indices(std::int64_t dataset_size, std::int64_t) const override {
    std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_size));
    std::iota(order.rbegin(), order.rend(), std::int64_t{0});
    return order;
  }
};

}  // namespace

TEST_CASE("DataLoader: every sample appears exactly once per epoch, with its own inputs") {
  const Dataset data = indexed_dataset(37, {2, 3});
  const std::vector<float> rows = data.inputs.to_vector<float>();
  for (const bool shuffle : {false, true}) {
    DataLoader loader(data, {.batch_size = 8, .shuffle = shuffle, .seed = 3});
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      const std::vector<optim::Batch> batches = read_epoch(loader, epoch);
      CHECK(sorted(indices_of(batches)) == iota_vector(37));
      for (const optim::Batch& batch : batches) {
        const std::vector<float> inputs = batch.inputs.to_vector<float>();
        const std::vector<std::int64_t> samples = indices_of(batch);
        for (std::size_t j = 0; j < samples.size(); ++j) {
          const auto row = rows.begin() + samples[j] * 6;
          CHECK(std::equal(row, row + 6, inputs.begin() + static_cast<std::ptrdiff_t>(j * 6)));
        }
      }
    }
  }
}

TEST_CASE("DataLoader: an epoch of 37 samples in batches of 8 has 5 batches, the last of 5") {
  DataLoader loader(indexed_dataset(37, {4, 2}), {.batch_size = 8});
  CHECK(loader.batches_per_epoch() == 5);
  CHECK(loader.samples_per_epoch() == 37);
  const std::vector<optim::Batch> batches = read_epoch(loader);
  REQUIRE(batches.size() == 5);
  for (std::size_t k = 0; k < 4; ++k) CHECK(batches[k].size() == 8);
  CHECK(batches[4].size() == 5);
  CHECK(batches[4].inputs.shape() == Shape{5, 4, 2});
  CHECK(batches[4].targets.shape() == Shape{5});
  CHECK(batches[4].targets.dtype() == DType::Int64);
}

TEST_CASE("DataLoader: drop_last drops the short final batch") {
  DataLoader loader(indexed_dataset(37), {.batch_size = 8, .drop_last = true});
  CHECK(loader.batches_per_epoch() == 4);
  const std::vector<optim::Batch> batches = read_epoch(loader);
  REQUIRE(batches.size() == 4);
  for (const optim::Batch& batch : batches) CHECK(batch.size() == 8);
  CHECK(indices_of(batches) == iota_vector(32));
}

TEST_CASE("DataLoader: without shuffle the samples come in order") {
  DataLoader loader(indexed_dataset(37), {.batch_size = 8});
  CHECK(indices_of(read_epoch(loader, 0)) == iota_vector(37));
  CHECK(indices_of(read_epoch(loader, 1)) == iota_vector(37));
}

TEST_CASE("DataLoader: the same seed gives the same order in two loaders") {
  DataLoader a(indexed_dataset(37), {.batch_size = 8, .shuffle = true, .seed = 11});
  DataLoader b(indexed_dataset(37), {.batch_size = 8, .shuffle = true, .seed = 11, .prefetch = 0});
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<std::int64_t> order = indices_of(read_epoch(a, epoch));
    CHECK(order != iota_vector(37));
    CHECK(order == indices_of(read_epoch(b, epoch)));
  }
}

TEST_CASE("DataLoader: shuffled epochs differ from one another") {
  DataLoader loader(indexed_dataset(37), {.batch_size = 8, .shuffle = true, .seed = 11});
  const std::vector<std::int64_t> first = indices_of(read_epoch(loader, 0));
  CHECK(indices_of(read_epoch(loader, 1)) != first);
  CHECK(indices_of(read_epoch(loader, 2)) != first);
  // Epoch 0 again: the order depends on the epoch number, not on history.
  CHECK(indices_of(read_epoch(loader, 0)) == first);
}

TEST_CASE("DataLoader: different seeds give different orders") {
  DataLoader a(indexed_dataset(37), {.batch_size = 8, .shuffle = true, .seed = 1});
  DataLoader b(indexed_dataset(37), {.batch_size = 8, .shuffle = true, .seed = 2});
  CHECK(indices_of(read_epoch(a)) != indices_of(read_epoch(b)));
}

TEST_CASE("DataLoader: prefetching yields exactly the batches of prefetch 0") {
  const Dataset data = indexed_dataset(37, {5, 3});
  const Normalization normalization{from_vector({0.5f, -0.25f, 0.0f}, {3}), from_vector({2.0f, 0.5f, 1.0f}, {3})};
  const auto options = [&](int prefetch) {
    return DataLoaderOptions{
        .batch_size = 8, .shuffle = true, .seed = 5, .prefetch = prefetch, .normalization = normalization};
  };
  DataLoader reference(data, options(0));
  for (const int prefetch : {1, 2, 5}) {
    DataLoader prefetching(data, options(prefetch));
    for (const optim::Shard shard : {optim::Shard{0, 1}, optim::Shard{1, 3}}) {
      for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
        const std::vector<optim::Batch> expected = read_epoch(reference, epoch, shard);
        const std::vector<optim::Batch> actual = read_epoch(prefetching, epoch, shard);
        REQUIRE(actual.size() == expected.size());
        for (std::size_t k = 0; k < actual.size(); ++k) {
          CHECK(actual[k].inputs.shape() == expected[k].inputs.shape());
          CHECK(actual[k].inputs.to_vector<float>() == expected[k].inputs.to_vector<float>());
          CHECK(indices_of(actual[k]) == indices_of(expected[k]));
        }
      }
    }
  }
}

TEST_CASE("DataLoader: begin_epoch in the middle of an epoch starts the new one afresh") {
  DataLoader loader(indexed_dataset(37), {.batch_size = 4, .shuffle = true, .seed = 9, .prefetch = 2});
  const std::vector<std::int64_t> expected = indices_of(read_epoch(loader, 1));
  loader.begin_epoch(0);
  REQUIRE(loader.next().has_value());
  CHECK(indices_of(read_epoch(loader, 1)) == expected);
}

TEST_CASE("DataLoader: next keeps returning nothing once the epoch is over") {
  DataLoader loader(indexed_dataset(5), {.batch_size = 8});
  loader.begin_epoch(0);
  CHECK(loader.next().has_value());
  CHECK_FALSE(loader.next().has_value());
  CHECK_FALSE(loader.next().has_value());
}

TEST_CASE("DataLoader: float [N, k] targets are gathered row by row") {
  Generator generator(3);
  const Tensor inputs = ddl::test::uniform_tensor({9, 2}, generator);
  const Tensor targets = ddl::test::uniform_tensor({9, 2}, generator);
  DataLoader loader(Dataset{inputs, targets}, {.batch_size = 4, .sampler = std::make_shared<ReverseSampler>()});
  const std::vector<optim::Batch> batches = read_epoch(loader);
  REQUIRE(batches.size() == 3);
  const std::vector<float> rows = targets.to_vector<float>();
  CHECK(batches[0].targets.shape() == Shape{4, 2});
  CHECK(batches[0].targets.to_vector<float>() ==
        std::vector<float>{rows[16], rows[17], rows[14], rows[15], rows[12], rows[13], rows[10], rows[11]});
  CHECK(batches[2].targets.to_vector<float>() == std::vector<float>{rows[0], rows[1]});
}

TEST_CASE("DataLoader: a custom sampler decides the order, overriding shuffle") {
  DataLoader loader(indexed_dataset(10),
                    {.batch_size = 3, .shuffle = true, .sampler = std::make_shared<ReverseSampler>()});
  CHECK(indices_of(read_epoch(loader)) == std::vector<std::int64_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
}

TEST_CASE("DataLoader: batches are delivered on options.device") {
  if (device_count(DeviceType::CPU) < 2) return test::skip("needs DDL_CPU_DEVICES >= 2");
  DataLoader loader(indexed_dataset(10), {.batch_size = 4, .device = cpu(1)});
  for (const optim::Batch& batch : read_epoch(loader)) {
    CHECK(batch.inputs.device() == cpu(1));
    CHECK(batch.targets.device() == cpu(1));
  }
}

TEST_CASE("DataLoader: destroying a loader in the middle of a prefetched epoch does not hang") {
  // Many batches ahead of a reader that stops after one: the producer is
  // blocked on a full queue when the loader goes away.
  const Dataset data = indexed_dataset(4096, {16});
  for (int round = 0; round < 20; ++round) {
    DataLoader loader(data, {.batch_size = 8, .shuffle = true, .prefetch = 3});
    loader.begin_epoch(round);
    CHECK(loader.next().has_value());
  }
  DataLoader never_read(data, {.batch_size = 8, .prefetch = 2});
  never_read.begin_epoch(0);
}

TEST_CASE("DataLoader: an empty data set gives empty epochs") {
  DataLoader loader(indexed_dataset(0), {.batch_size = 4});
  CHECK(loader.batches_per_epoch({1, 3}) == 0);
  CHECK(read_epoch(loader, 0, {1, 3}).empty());
}
