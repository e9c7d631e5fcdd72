// DataLoader sharding: equal shard sizes by wrapping around (so no rank runs
// out of batches before the others and leaves them waiting), full coverage,
// and per-rank batches whose union is the one-rank batch.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include <ddl/ddl.hpp>
#include <ddl/models/data/data_loader.hpp>

#include "models/data/loader_test_data.hpp"

using namespace ddl;
using namespace ddl::models;
using ddl::test::indexed_dataset;
using ddl::test::indices_of;
using ddl::test::read_epoch;

TEST_CASE("DataLoader: shards of 37 samples have equal sizes and together cover every sample") {
  for (const int world : {2, 3}) {
    CAPTURE(world);
    DataLoader loader(indexed_dataset(37), {.batch_size = 8, .shuffle = true, .seed = 4});
    const std::int64_t per_rank = (37 + world - 1) / world;
    std::vector<std::int64_t> all;
    for (int rank = 0; rank < world; ++rank) {
      const optim::Shard shard{rank, world};
      CHECK(loader.samples_per_epoch(shard) == per_rank);
      CHECK(loader.batches_per_epoch(shard) == (per_rank + 7) / 8);
      const std::vector<std::int64_t> mine = indices_of(read_epoch(loader, 1, shard));
      CHECK(static_cast<std::int64_t>(mine.size()) == per_rank);
      all.insert(all.end(), mine.begin(), mine.end());
    }
    // Padding repeats the first world * per_rank - 37 samples of the order.
    CHECK(static_cast<std::int64_t>(all.size()) == world * per_rank);
    const std::set<std::int64_t> distinct(all.begin(), all.end());
    CHECK(distinct.size() == 37);
    CHECK(*distinct.begin() == 0);
    CHECK(*distinct.rbegin() == 36);
  }
}

TEST_CASE("DataLoader: the padding is marked, so the samples not marked cover the epoch exactly once") {
  for (const int world : {2, 3, 4, 5}) {
    for (const std::int64_t batch_size : {1, 4, 8}) {
      CAPTURE(world);
      CAPTURE(batch_size);
      DataLoader loader(indexed_dataset(37), {.batch_size = batch_size, .shuffle = true, .seed = 4, .prefetch = 2});
      std::multiset<std::int64_t> own;
      for (int rank = 0; rank < world; ++rank) {
        const std::vector<optim::Batch> batches = read_epoch(loader, 2, {rank, world});
        for (std::size_t k = 0; k < batches.size(); ++k) {
          // Only a shard's last batch may carry padding, at its end.
          if (k + 1 < batches.size()) CHECK(batches[k].padding == 0);
          CHECK(batches[k].padding <= batches[k].size());
          const std::vector<std::int64_t> indices = indices_of(batches[k]);
          own.insert(indices.begin(), indices.end() - batches[k].padding);
        }
      }
      std::vector<std::int64_t> every(37);
      std::iota(every.begin(), every.end(), 0);
      CHECK(std::vector<std::int64_t>(own.begin(), own.end()) == every);
    }
  }
}

TEST_CASE("DataLoader: rank r takes positions r, r + world, ... of the wrapped epoch order") {
  DataLoader one_rank(indexed_dataset(37), {.batch_size = 37, .shuffle = true, .seed = 8});
  const std::vector<std::int64_t> order = indices_of(read_epoch(one_rank, 2));
  DataLoader sharded(indexed_dataset(37), {.batch_size = 5, .shuffle = true, .seed = 8});
  for (int rank = 0; rank < 3; ++rank) {
    const std::vector<std::int64_t> mine = indices_of(read_epoch(sharded, 2, {rank, 3}));
    REQUIRE(mine.size() == 13);
    for (std::size_t i = 0; i < mine.size(); ++i)
      CHECK(mine[i] == order[(static_cast<std::size_t>(rank) + i * 3) % 37]);
  }
}

TEST_CASE("DataLoader: with N divisible by world the ranks' k-th batches make up the one-rank k-th batch") {
  for (const int world : {2, 3}) {
    CAPTURE(world);
    const std::int64_t batch = 12;
    DataLoader one_rank(indexed_dataset(36), {.batch_size = batch, .shuffle = true, .seed = 6});
    DataLoader sharded(indexed_dataset(36), {.batch_size = batch / world, .shuffle = true, .seed = 6});
    const std::vector<optim::Batch> expected = read_epoch(one_rank, 3);
    std::vector<std::vector<optim::Batch>> per_rank;
    for (int rank = 0; rank < world; ++rank) per_rank.push_back(read_epoch(sharded, 3, {rank, world}));
    for (std::size_t k = 0; k < expected.size(); ++k) {
      std::vector<std::int64_t> together;
      for (const auto& batches : per_rank) {
        REQUIRE(batches.size() == expected.size());
        const std::vector<std::int64_t> part = indices_of(batches[k]);
        together.insert(together.end(), part.begin(), part.end());
      }
      std::vector<std::int64_t> whole = indices_of(expected[k]);
      std::sort(together.begin(), together.end());
      std::sort(whole.begin(), whole.end());
      CHECK(together == whole);
    }
  }
}

TEST_CASE("DataLoader: world 1 pads nothing") {
  DataLoader loader(indexed_dataset(37), {.batch_size = 8});
  CHECK(loader.samples_per_epoch({0, 1}) == 37);
  CHECK(indices_of(read_epoch(loader, 0, {0, 1})).size() == 37);
}

TEST_CASE("DataLoader: with fewer samples than ranks the order wraps around repeatedly") {
  DataLoader loader(indexed_dataset(2), {.batch_size = 4});
  for (int rank = 0; rank < 5; ++rank) {
    CHECK(loader.samples_per_epoch({rank, 5}) == 1);
    CHECK(indices_of(read_epoch(loader, 0, {rank, 5})) == std::vector<std::int64_t>{rank % 2});
  }
}

TEST_CASE("DataLoader: drop_last drops the short final batch of each shard") {
  DataLoader loader(indexed_dataset(37), {.batch_size = 8, .drop_last = true});
  // 19 samples per rank of 2: two full batches, three samples dropped.
  CHECK(loader.batches_per_epoch({1, 2}) == 2);
  const std::vector<optim::Batch> batches = read_epoch(loader, 0, {1, 2});
  REQUIRE(batches.size() == 2);
  CHECK(batches[1].size() == 8);
}
