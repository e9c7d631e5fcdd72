// Sampler, the order of an epoch's samples that the DataLoader follows, and
// its two stock orders: in order, or a seeded shuffle that changes every
// epoch and is the same on every rank and every machine.
#pragma once

#include <cstdint>
#include <vector>

namespace ddl::models {

// The order of a data set's samples in one epoch: a permutation (or any
// sequence) of indices in [0, dataset_size). Must depend only on its
// arguments and construction, never on call history, so that every rank
// computes the same order and a resumed run the same as an uninterrupted one.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<std::int64_t> indices(std::int64_t dataset_size, std::int64_t epoch) const = 0;
};

// 0, 1, ..., n-1 in every epoch.
class SequentialSampler : public Sampler {
 public:
  std::vector<std::int64_t> indices(std::int64_t dataset_size, std::int64_t epoch) const override;
};

// A uniformly random permutation of 0..n-1, a pure function of (seed, epoch,
// n): Fisher–Yates (Knuth, TAOCP vol. 2, Algorithm 3.4.2 P) whose swap for
// position i draws 64 bits from Philox4x32-10 with key = seed and counter =
// epoch * 2^40 + i. Integer arithmetic only, so every machine, rank and
// thread count gets the same order; every epoch gets a different one, as a
// sharded sampler must (PyTorch's DistributedSampler repeats one order
// unless the user calls set_epoch). Needs 0 <= epoch < 2^24 and n <= 2^40.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(std::uint64_t seed) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }
  std::vector<std::int64_t> indices(std::int64_t dataset_size, std::int64_t epoch) const override;

 private:
  std::uint64_t seed_;
};

}  // namespace ddl::models
