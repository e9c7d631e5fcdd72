// StepMemoryMonitor (see memory_monitor.hpp).
#include <ddl/optim/engine/memory_monitor.hpp>

#include <sys/resource.h>

#include <algorithm>

#include <ddl/core/allocator.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/trainer.hpp>

namespace ddl::optim {

std::size_t gradient_bytes_on(const layers::Module& model, const Device& device) {
  std::size_t bytes = 0;
  for (const Tensor& param : model.parameters()) {
    const Tensor grad = param.grad();
    if (grad.defined() && grad.device() == device) bytes += grad.nbytes();
  }
  return bytes;
}

double peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux counts KiB
}

StepMemoryMonitor::StepMemoryMonitor(std::vector<Device> devices)
    : devices_(std::move(devices)),
      in_use_at_begin_(devices_.size()),
      gradients_at_begin_(devices_.size()),
      steady_(devices_.size(), false) {
  for (const Device& device : devices_) peaks_.push_back({device, 0, 0});
}

void StepMemoryMonitor::on_batch_begin(Trainer& trainer, std::int64_t /*step*/) {
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    reset_peak_memory_stats(devices_[d]);
    in_use_at_begin_[d] = memory_stats(devices_[d]).bytes_in_use;
    gradients_at_begin_[d] = gradient_bytes_on(trainer.model(), devices_[d]);
  }
}

void StepMemoryMonitor::on_batch_end(Trainer& trainer, std::int64_t /*step*/, const Logs& /*logs*/) {
  for (std::size_t d = 0; d < devices_.size(); ++d) {
    // At the step's start the last step's gradients were still held; the
    // step drops them and writes new ones. The peak above the resident
    // state (parameters, optimizer state, the batch) less the new gradients
    // is what the step's activations and scratch took at their highest.
    // A step that leaves more held besides (the optimizer's state, made at
    // its first step) mixes state into its peak, before or after it: such a
    // step counts only until a steady one (held no more than it began) is
    // seen, with what it left held taken as state.
    const std::size_t resident = in_use_at_begin_[d] - gradients_at_begin_[d];
    const std::size_t gradients = gradient_bytes_on(trainer.model(), devices_[d]);
    const MemoryStats stats = memory_stats(devices_[d]);
    const bool steady = stats.bytes_in_use <= resident + gradients;
    const std::size_t held = std::max(resident + gradients, stats.bytes_in_use);
    const std::size_t above = stats.peak_bytes > held ? stats.peak_bytes - held : 0;
    std::size_t& peak = peaks_[d].peak_activation_bytes;
    if (steady && !steady_[d]) {
      peak = above;
      steady_[d] = true;
    } else if (steady || !steady_[d]) {
      peak = std::max(peak, above);
    }
    peaks_[d].gradient_bytes = std::max(peaks_[d].gradient_bytes, gradients);
  }
}

}  // namespace ddl::optim
