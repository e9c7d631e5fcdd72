// The CPU backend's elementwise loop: runs kernel(i) for i in [0, n) over
// OpenMP threads with a static schedule, so a given thread count always
// splits the work the same way. Small loops stay on one thread because
// waking the team costs more than they do.
#pragma once

#include <cstdint>

namespace ddl::cpu_backend {

constexpr std::int64_t kParallelGrain = 1 << 15;

// Each thread runs its own copy of the kernel: through the caller's object
// the compiler must assume that a store to the output (a float*) may change
// the kernel's own float members (a dropout rate, a scalar), reloads them
// every element and gives up vectorising; a local copy's members stay in
// registers. (Dropout's apply ran scalar, 3x slower, on AVX2.)
template <class Kernel>
void parallel_for(std::int64_t n, const Kernel& kernel) {
  if (n < kParallelGrain) {
    const Kernel local = kernel;
    for (std::int64_t i = 0; i < n; ++i) local(i);
    return;
  }
#pragma omp parallel
  {
    const Kernel local = kernel;
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) local(i);
  }
}

}  // namespace ddl::cpu_backend
