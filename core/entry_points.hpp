// Which backend entry points this process has run, on which device: every
// kernel launched through backend::launch (by its name in its module's
// list, kernel_list.hpp) and every library call sent through
// backend::dispatch (by its op name: "gemm", "conv2d backward", ...).
// The conformance suite asks it whether its cases ran every kernel and
// every library call on the device under test, so an entry point added
// without a case fails there instead of going untested on the GPU.
//
// Noting costs a dispatch one relaxed atomic load once a call site has seen
// its op on a device; the first time, it takes a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <ddl/core/device.hpp>

namespace ddl::backend {

// The entry points run on `device` so far, sorted, each once.
std::vector<std::string> entry_points_run(const Device& device);

// Records that `op` ran on `device`.
void note_entry_point(const char* op, const Device& device);

// One call site's memory of what it has noted, so that it notes each
// (op, device) once: the op it last noted and a bit per device
// (cpu:0..31, cuda:0..31) it noted that op on. A site whose op name changes
// between calls (max or average pooling) starts its bits again.
class EntryPointSite {
 public:
  void note(const char* op, const Device& device) {
    const std::uint64_t bit = bit_of(device);
    if (bit != 0 && op_.load(std::memory_order_relaxed) == op && (seen_.load(std::memory_order_relaxed) & bit) != 0)
      return;
    note_entry_point(op, device);
    if (op_.exchange(op, std::memory_order_relaxed) != op) seen_.store(0, std::memory_order_relaxed);
    seen_.fetch_or(bit, std::memory_order_relaxed);
  }

 private:
  static std::uint64_t bit_of(const Device& device) {
    if (device.index() < 0 || device.index() >= 32) return 0;  // noted every time
    return std::uint64_t{1} << (device.index() + (device.is_cuda() ? 32 : 0));
  }

  std::atomic<const char*> op_{nullptr};
  std::atomic<std::uint64_t> seen_{0};
};

}  // namespace ddl::backend
