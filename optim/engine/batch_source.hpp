// How the Trainer receives data: an epoch
// is a stream of batches from a BatchSource. Declared here, below the data
// sets that implement it (models::DataLoader), so the engine depends on no
// data set; a parallel strategy hands each rank its Shard of every epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::optim {

struct Batch {
  Tensor inputs;   // [B, ...]
  Tensor targets;  // [B] class labels or [B, k] regression targets
  // The last `padding` samples repeat earlier ones of the epoch, so that
  // every rank's shard has as many (PyTorch's DistributedSampler pads the
  // same way): they train like the others, but no metric counts them.
  std::int64_t padding = 0;
  std::int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

// The part of every epoch one rank reads: rank r of `world` ranks.
struct Shard {
  int rank = 0;
  int world = 1;
};

// A stream of batches, restarted for every epoch.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Starts epoch `epoch` (0-based) for `shard`; the batches of any earlier
  // epoch not yet read are dropped.
  virtual void begin_epoch(std::int64_t epoch, Shard shard = {}) = 0;
  // The next batch of the current epoch, or nullopt once it is exhausted.
  virtual std::optional<Batch> next() = 0;
  // Batches and samples next() yields in one epoch for `shard`.
  virtual std::int64_t batches_per_epoch(Shard shard = {}) const = 0;
  virtual std::int64_t samples_per_epoch(Shard shard = {}) const = 0;
};

}  // namespace ddl::optim
