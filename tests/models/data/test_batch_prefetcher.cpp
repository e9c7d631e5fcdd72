// BatchPrefetcher (models/data/batch_prefetcher.cpp): order, the bound on batches
// made ahead, errors rethrown in place, and stopping mid-stream.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <ddl/ddl.hpp>
#include <ddl/models/data/batch_prefetcher.hpp>

using namespace ddl;
using namespace ddl::models;

namespace {

optim::Batch numbered(std::int64_t k) { return {zeros({1}), from_vector(std::vector<std::int64_t>{k}, {1})}; }

std::int64_t number_of(const optim::Batch& batch) { return batch.targets.to_vector<std::int64_t>()[0]; }

}  // namespace

TEST_CASE("BatchPrefetcher: returns the batches in order, then nothing") {
  BatchPrefetcher prefetcher(numbered, 5, 2);
  for (std::int64_t k = 0; k < 5; ++k) CHECK(number_of(prefetcher.next().value()) == k);
  CHECK_FALSE(prefetcher.next().has_value());
  CHECK_FALSE(prefetcher.next().has_value());
}

TEST_CASE("BatchPrefetcher: makes at most capacity batches ahead of the reader") {
  std::atomic<std::int64_t> made{0};
  BatchPrefetcher prefetcher(
      [&](std::int64_t k) {
        ++made;
        return numbered(k);
      },
      100, 3);
  for (std::int64_t read = 0; read < 4; ++read) {
    // Give the producer time to run as far ahead as it may.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(made.load() <= read + 3);
    CHECK(number_of(prefetcher.next().value()) == read);
  }
}

TEST_CASE("BatchPrefetcher: an exception in make_batch is rethrown by next after the earlier batches") {
  BatchPrefetcher prefetcher(
      [](std::int64_t k) {
        if (k == 2) throw Error("batch 2 is broken");
        return numbered(k);
      },
      5, 2);
  CHECK(number_of(prefetcher.next().value()) == 0);
  CHECK(number_of(prefetcher.next().value()) == 1);
  CHECK_THROWS_WITH_AS(prefetcher.next(), "batch 2 is broken", Error);
  CHECK_FALSE(prefetcher.next().has_value());
}

TEST_CASE("BatchPrefetcher: destroying it while the producer waits for room does not hang") {
  BatchPrefetcher prefetcher(numbered, 1000, 1);
  CHECK(number_of(prefetcher.next().value()) == 0);
}
