// What the GPU ran during a timed region, from CUPTI's activity records:
// every kernel, copy and memset, summed by name, beside the region's wall
// time. It answers the first question about a GPU step that is slower than
// its arithmetic: is the GPU busy (then which kernels take the time), or
// waiting for the host to enqueue work? The GPU machines lent to this
// project carry the CUDA toolkit's CUPTI (scripts/gpu/bundle.sh packs it)
// but not Nsight Systems, whose kernel summary this imitates.
#pragma once

#include <cstdio>

namespace ddl::bench {

// Records from construction until print(). CUPTI's callbacks are global to
// the process, so one table at a time.
class KernelTable {
 public:
  KernelTable();  // std::runtime_error with CUPTI's message if it cannot record
  ~KernelTable();
  KernelTable(const KernelTable&) = delete;
  KernelTable& operator=(const KernelTable&) = delete;

  // Flushes CUPTI's buffers and prints, per step of the `steps` that took
  // `wall_ms` in all: the GPU's busy time (the union of the activities'
  // intervals), the activities' count, and the `rows` names that took the
  // most time.
  void print(std::FILE* out, double wall_ms, int steps, int rows = 25);
};

}  // namespace ddl::bench
