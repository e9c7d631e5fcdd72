// StepMemoryMonitor: how much memory a training step needs on each device
// beyond the model's resident state, measured by the allocator's own
// counters (memory_stats). Placement and pipeline reports use it to say what
// each device holds: parameters and optimizer state are known from their
// tensors; activations are what this measures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/callback.hpp>

namespace ddl::optim {

struct StepMemory {
  Device device;
  std::size_t peak_activation_bytes = 0;  // activations kept for backward, and scratch
  std::size_t gradient_bytes = 0;         // the parameters' gradients on this device
};

class StepMemoryMonitor : public Callback {
 public:
  explicit StepMemoryMonitor(std::vector<Device> devices);

  void on_batch_begin(Trainer& trainer, std::int64_t step) override;
  void on_batch_end(Trainer& trainer, std::int64_t step, const Logs& logs) override;

  // Per device in the order given, the most over the steps seen so far
  // (zeros before the first step).
  const std::vector<StepMemory>& peaks() const { return peaks_; }

 private:
  std::vector<Device> devices_;
  std::vector<std::size_t> in_use_at_begin_;
  std::vector<std::size_t> gradients_at_begin_;
  std::vector<bool> steady_;  // per device: a step that left no more held than it began has been seen
  std::vector<StepMemory> peaks_;
};

// The bytes of the gradients of `model`'s parameters that lie on `device`.
std::size_t gradient_bytes_on(const layers::Module& model, const Device& device);

// The peak resident set of this process so far, in bytes (getrusage):
// everything included, what the operating system counts against it.
double peak_resident_bytes();

// Bytes in MiB, as the memory reports print them.
inline double mebibytes(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace ddl::optim
