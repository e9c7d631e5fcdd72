// DataLoader: turns an in-memory Dataset into the batches the Trainer reads
// (an optim::BatchSource, so the one Trainer reads it under every strategy):
// sample order, per-rank shards, normalisation and background prefetching.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/models/data/dataset.hpp>
#include <ddl/models/data/normalization.hpp>
#include <ddl/models/data/sampler.hpp>
#include <ddl/optim/engine/batch_source.hpp>

namespace ddl::models {

class BatchPrefetcher;

struct DataLoaderOptions {
  // Samples per batch (per rank when sharded), >= 1. The last batch of an
  // epoch is shorter unless drop_last.
  std::int64_t batch_size = 32;
  // Without a sampler: a RandomSampler(seed) when true, else a
  // SequentialSampler.
  bool shuffle = false;
  std::uint64_t seed = 0;
  // Drops the final batch of each epoch (of each shard) if it is short, so
  // every batch has batch_size samples.
  bool drop_last = false;
  // Batches prepared ahead by a background thread (>= 0); 0 prepares each
  // batch inside next(), on the caller's thread. Either way the batches are
  // the same.
  int prefetch = 2;
  // Where next() delivers batches. They are gathered on the host and moved
  // there on the caller's thread; to a GPU that thread waits until the batch
  // is read into page-locked memory, not for the work queued on the GPU
  // (while the copies the GPU has not yet made fit four 4 MiB chunks).
  Device device = cpu();
  // Applied to the inputs only, while a batch is gathered; targets are copied
  // as they are.
  std::optional<Normalization> normalization{};
  // The order of each epoch's samples; overrides shuffle and seed when set.
  // Must return the same number of indices, each in [0, N), for every epoch.
  std::shared_ptr<const Sampler> sampler{};
};

// Batches of a Dataset, one epoch at a time.
//
// Each epoch the sampler gives an order of the N samples (or of the L
// indices a custom sampler gives; read N as L below). For Shard{rank,
// world} with world > 1 that order is padded by wrapping around to a multiple
// of world (again and again when N < world), as PyTorch's DistributedSampler
// does, so every rank gets ceil(N / world) samples and the ranks step in
// lockstep. Rank r takes positions r, r + world, r + 2 world, ...: with a
// per-rank batch of B / world and N divisible by world, the union of the
// ranks' k-th batches is exactly the k-th batch of size B on one rank, which
// makes N-rank training comparable with 1-rank training. With world = 1
// nothing is padded.
//
// Not copyable or movable: the prefetch thread refers to the loader.
class DataLoader : public optim::BatchSource {
 public:
  // `dataset` must live on the host: inputs float32 [N, ...], targets any
  // dtype [N, ...]. Its tensors are shared, not copied, and must not be
  // written while the loader exists. Throws ddl::Error naming the value or
  // shapes at fault for a bad dataset, option or normalisation.
  explicit DataLoader(Dataset dataset, DataLoaderOptions options = {});
  ~DataLoader() override;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Drops what is left of the current epoch (stopping its prefetch thread)
  // and starts `epoch` (>= 0) for `shard` (world >= 1, 0 <= rank < world).
  void begin_epoch(std::int64_t epoch, optim::Shard shard = {}) override;
  // The next batch on options.device; nullopt once the epoch is over. Throws
  // ddl::Error before the first begin_epoch, and rethrows any error met while
  // preparing the batch.
  std::optional<optim::Batch> next() override;
  std::int64_t batches_per_epoch(optim::Shard shard = {}) const override;
  std::int64_t samples_per_epoch(optim::Shard shard = {}) const override;

  const Dataset& dataset() const { return dataset_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  // The sampler's order for `epoch`, checked against the dataset size and
  // against the length of epoch 0 (which sizes every epoch).
  std::vector<std::int64_t> epoch_order(std::int64_t epoch) const;
  // Batch k of the current shard order, gathered (and normalised) on the host.
  optim::Batch gather(const std::vector<std::int64_t>& order, std::int64_t k) const;

  Dataset dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<const Sampler> sampler_;
  std::int64_t epoch_length_ = 0;  // indices the sampler gives per epoch
  std::optional<SampleNormalization> normalization_;

  // The current epoch: this shard's sample order, and how far next() got.
  bool epoch_started_ = false;
  std::shared_ptr<const std::vector<std::int64_t>> shard_order_;
  std::int64_t shard_samples_ = 0;  // of the shard order, those before the padding
  std::int64_t batch_count_ = 0;
  std::int64_t next_batch_ = 0;
  // Declared last: destroyed first, joining its thread before the state that
  // thread reads goes away.
  std::unique_ptr<BatchPrefetcher> prefetcher_;
};

}  // namespace ddl::models
