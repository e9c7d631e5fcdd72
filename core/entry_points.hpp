// Which backend entry points this process has run, on which device: every
// kernel launched through backend::launch (by its name in its module's
// list, kernel_list.hpp) and every library call sent through
// backend::dispatch (by its op name: "gemm", "conv2d backward", ...).
// The conformance suite asks it whether its cases ran every kernel and
// every library call on the device under test, so an entry point added
// without a case fails there instead of going untested on the GPU.
//
// Once a call site has noted its op on a device, noting again costs two
// atomic loads (plain loads on x86); the first time takes a lock.
#pragma once

#include <array>
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
// (op, device) once: up to two op names (pooling's max and average, a
// copy's two kinds), each with a bit per device (cpu:0..31, cuda:0..31).
// A slot's name is set once and its bits only ever added, so threads may
// note at once; a third name at one site is noted every time.
class EntryPointSite {
 public:
  void note(const char* op, const Device& device) {
    const std::uint64_t bit = bit_of(device);
    for (Slot& slot : slots_) {
      const char* held = slot.op.load(std::memory_order_acquire);
      if (held == nullptr && slot.op.compare_exchange_strong(held, op, std::memory_order_acq_rel)) held = op;
      if (held != op) continue;
      if ((slot.seen.load(std::memory_order_acquire) & bit) != 0) return;
      note_entry_point(op, device);
      slot.seen.fetch_or(bit, std::memory_order_release);
      return;
    }
    note_entry_point(op, device);
  }

 private:
  struct Slot {
    std::atomic<const char*> op{nullptr};
    std::atomic<std::uint64_t> seen{0};
  };

  static std::uint64_t bit_of(const Device& device) {
    if (device.index() < 0 || device.index() >= 32) return 0;  // noted every time
    return std::uint64_t{1} << (device.index() + (device.is_cuda() ? 32 : 0));
  }

  std::array<Slot, 2> slots_{};
};

}  // namespace ddl::backend
