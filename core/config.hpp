// Every DDL_* environment variable is read here and nowhere else, each with
// its default and meaning (NCCL_PARAM / Horovod common.h style). The README
// lists the same variables.
#pragma once

#include <cstdint>

namespace ddl::config {

// DDL_CPU_DEVICES (default 1): number of logical CPU devices cpu:0..N-1.
int cpu_device_count();

// DDL_NUM_THREADS (default: OpenMP's choice, usually the core count):
// threads used by CPU kernels and Eigen's GEMM.
int num_threads();

// Overrides DDL_NUM_THREADS for the rest of the process.
void set_num_threads(int threads);

// DDL_STALL_TIMEOUT (seconds, default 60, as Horovod's stall warning): how
// long a rank waits for a message or collective before it reports which
// ranks are missing and aborts the job.
double stall_timeout_seconds();
// DDL_FUSION_THRESHOLD (bytes, default 25 MiB, as PyTorch DDP's bucket_cap_mb):
// the size of the gradient buckets data parallelism reduces at once.
std::int64_t fusion_threshold_bytes();
// DDL_RING_SEGMENT (bytes, default 256 KiB; measured best of 128 KiB..1 MiB
// on 2 ranks, docs/PERFORMANCE.md): the pieces a ring collective cuts
// each chunk into, so the reduction of one overlaps the transfer of the next.
std::int64_t ring_segment_bytes();
// DDL_SHM_SEGMENT (bytes, default 256 KiB; best of 64 KiB..4 MiB on 2 ranks,
// docs/PERFORMANCE.md): the piece of
// the buffer the shared-memory allreduce reduces at a time; each rank's
// window holds two of them.
std::int64_t shm_segment_bytes();

}  // namespace ddl::config

namespace ddl {
using config::set_num_threads;
}
