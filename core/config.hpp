// core's DDL_* environment variables, each read here and nowhere else with
// its default and meaning (NCCL_PARAM / Horovod common.h style); the
// parallel module's are in parallel/config.hpp. The README lists them all.
#pragma once

#include <cstdint>

namespace ddl::config {

// DDL_CPU_DEVICES (default 1): number of logical CPU devices cpu:0..N-1.
int cpu_device_count();

// DDL_NUM_THREADS (default: OpenMP's choice, usually the core count):
// threads used by CPU kernels and Eigen's GEMM.
int num_threads();

// Overrides DDL_NUM_THREADS for the rest of the process (1 to kMaxThreads:
// far past any core count, below where OpenMP's runtime breaks).
inline constexpr int kMaxThreads = 1024;
void set_num_threads(int threads);

// The CPUs this process may run on (its affinity mask): more threads than
// these only slow the kernels down.
int available_cpus();

// Reads every core DDL_* variable now, so a bad value is an error here (at
// start-up) rather than wherever it is first used; parallel has its own.
void check_environment();

// The readers of DDL_* variables, for the settings other modules keep
// beside their code (parallel/config.hpp): the variable's value, or
// `fallback` when it is unset or empty; anything but a positive number is
// an error naming the variable.
double positive_double_from_environment(const char* name, double fallback);
std::int64_t positive_bytes_from_environment(const char* name, std::int64_t fallback);

}  // namespace ddl::config

namespace ddl {
using config::set_num_threads;
}
