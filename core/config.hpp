// Every DDL_* environment variable is read here and nowhere else, each with
// its default and meaning (NCCL_PARAM / Horovod common.h style). The README
// lists the same variables.
#pragma once

namespace ddl::config {

// DDL_CPU_DEVICES (default 1): number of logical CPU devices cpu:0..N-1.
int cpu_device_count();

// DDL_NUM_THREADS (default: OpenMP's choice, usually the core count):
// threads used by CPU kernels and Eigen's GEMM.
int num_threads();

// Overrides DDL_NUM_THREADS for the rest of the process.
void set_num_threads(int threads);

}  // namespace ddl::config

namespace ddl {
using config::set_num_threads;
}
