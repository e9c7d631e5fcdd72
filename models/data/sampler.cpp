// SequentialSampler and RandomSampler: the epoch orders a DataLoader uses
// unless it is given its own Sampler.
#include <ddl/models/data/sampler.hpp>

#include <numeric>
#include <utility>

#include <ddl/core/check.hpp>
#include <ddl/core/random.hpp>

namespace ddl::models {
namespace {

// The counter layout of RandomSampler: the low bits index the swap, the high
// bits the epoch, so no two (epoch, position) pairs share a Philox block.
constexpr int kPositionBits = 40;
constexpr std::int64_t kMaxEpochs = std::int64_t{1} << (64 - kPositionBits);
constexpr std::int64_t kMaxSamples = std::int64_t{1} << kPositionBits;

std::vector<std::int64_t> identity(std::int64_t dataset_size, const char* sampler) {
  DDL_CHECK(dataset_size >= 0, "{}: the dataset size must be >= 0, got {}", sampler, dataset_size);
  std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_size));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  return order;
}

}  // namespace

std::vector<std::int64_t> SequentialSampler::indices(std::int64_t dataset_size, std::int64_t /*epoch*/) const {
  return identity(dataset_size, "SequentialSampler");
}

std::vector<std::int64_t> RandomSampler::indices(std::int64_t dataset_size, std::int64_t epoch) const {
  DDL_CHECK(epoch >= 0 && epoch < kMaxEpochs, "RandomSampler: epoch must be in [0, {}), got {}", kMaxEpochs, epoch);
  DDL_CHECK(dataset_size <= kMaxSamples, "RandomSampler: at most {} samples, got {}", kMaxSamples, dataset_size);
  std::vector<std::int64_t> order = identity(dataset_size, "RandomSampler");
  const std::uint64_t epoch_base = static_cast<std::uint64_t>(epoch) << kPositionBits;
  for (std::int64_t i = dataset_size - 1; i > 0; --i) {
    const Philox4x32 block(epoch_base + static_cast<std::uint64_t>(i), seed_);
    const std::uint64_t bits = (static_cast<std::uint64_t>(block.out[1]) << 32) | block.out[0];
    // The modulo's bias is below n / 2^64: far beneath anything a test or a
    // training run could notice.
    const auto j = static_cast<std::int64_t>(bits % static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

}  // namespace ddl::models
