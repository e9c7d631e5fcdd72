// The CPU backend's elementwise loop: runs kernel(i) for i in [0, n) over
// OpenMP threads with a static schedule, so a given thread count always
// splits the work the same way. Small loops stay on one thread because
// waking the team costs more than they do. And a loop of coarse tasks
// that may throw.
#pragma once

#include <cstdint>
#include <exception>

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

// Runs task(i) for i in [0, n) over OpenMP threads with a static schedule.
// An exception may not leave an OpenMP region: the first one a task throws
// is kept, the other tasks still run, and it is rethrown here after them.
template <class Task>
void parallel_tasks(std::int64_t n, const Task& task) {
  std::exception_ptr failure;
#pragma omp parallel for schedule(static) if (n > 1)
  for (std::int64_t i = 0; i < n; ++i) {
    try {
      task(i);
    } catch (...) {
#pragma omp critical(ddl_parallel_tasks_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ddl::cpu_backend
