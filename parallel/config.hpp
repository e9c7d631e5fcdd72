// The parallel module's DDL_* environment variables, each read here and
// nowhere else with its default and meaning (core's are in core/config.hpp;
// the README lists them all).
#pragma once

#include <cstdint>

namespace ddl::parallel::config {

// DDL_STALL_TIMEOUT (seconds, default 60, as Horovod's stall warning, at
// most a week): how long a rank waits for a message or collective before
// it reports which ranks are missing and aborts the job.
double stall_timeout_seconds();
// DDL_FUSION_THRESHOLD (bytes, default 25 MiB, as PyTorch DDP's bucket_cap_mb):
// the size of the gradient buckets data parallelism reduces at once.
std::int64_t fusion_threshold_bytes();
// DDL_RING_SEGMENT (bytes, default 256 KiB; measured best of 128 KiB..1 MiB
// on 2 ranks, docs/PERFORMANCE.md): the pieces a ring collective cuts each
// chunk into, so the reduction of one overlaps the transfer of the next.
std::int64_t ring_segment_bytes();
// DDL_SHM_SEGMENT (bytes, default 1 MiB; under backward's load 256 KiB
// segments lost 3-11 points of data-parallel efficiency, docs/PERFORMANCE.md):
// the piece of the buffer the shared-memory allreduce reduces at a time;
// each rank's window holds two of them.
std::int64_t shm_segment_bytes();

// The getters above fall back to the default on a bad value, since they run
// inside waits and at exit; this reads every variable strictly and throws
// ddl::Error naming a bad one (the strategies' constructors call it, and
// ddl-train at start-up).
void check_environment();

}  // namespace ddl::parallel::config
