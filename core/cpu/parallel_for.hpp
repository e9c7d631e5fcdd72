// The CPU backend's elementwise loop: runs kernel(i) for i in [0, n) over
// OpenMP threads with a static schedule, so a given thread count always
// splits the work the same way. Small loops stay on one thread because
// waking the team costs more than they do.
#pragma once

#include <cstdint>

namespace ddl::cpu_backend {

constexpr std::int64_t kParallelGrain = 1 << 15;

template <class Kernel>
void parallel_for(std::int64_t n, const Kernel& kernel) {
  if (n < kParallelGrain) {
    for (std::int64_t i = 0; i < n; ++i) kernel(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) kernel(i);
}

}  // namespace ddl::cpu_backend
