// Checks that keep data parallelism from hanging or silently mixing
// different tensors, the failures Horovod's controller and stall inspector
// guard against:
//   agree_on_layout: before the first allreduce of a bucket layout, the
//     ranks compare it entry by entry; a difference aborts every rank with
//     the entry and what each rank has there.
//   agree_all_can_proceed: before a step that needs every rank (starting
//     NCCL, ddl-train's start-up), a rank's local problem becomes an error
//     on every rank, quoting it.
//   StallInspector: at a fixed point of every step each rank reports to
//     rank 0; a rank that does not arrive within the stall timeout is named
//     by rank 0, and the job aborts instead of hanging.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

// Every rank's `values` (the same count on each), concatenated in rank
// order: the allgather of a report's row, a count, a hash (collective).
template <class T>
requires std::is_trivially_copyable_v<T> std::vector<T> allgather_values(const Communicator& comm,
                                                                         std::span<const T> values) {
  const std::vector<std::byte> bytes = comm.allgather_bytes(std::as_bytes(values));
  std::vector<T> all(bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(all.data(), bytes.data(), bytes.size());  // no ranks' entries: no buffer at all
  return all;
}

// Where the ranks' `lines` first differ: the entry's index, the most lines
// any rank has, and each rank's line there (cut to 1 KiB); nullopt when
// every rank has the same lines. Collective.
struct Disagreement {
  std::int64_t entry;
  std::int64_t entries;
  std::vector<std::string> per_rank;
};
std::optional<Disagreement> first_disagreement(const Communicator& comm, const std::vector<std::string>& lines);

// `lines` describe this rank's layout, one entry each (name, shape, dtype).
// Returns when every rank has the same lines; otherwise every rank prints
// "<what>: ranks disagree on entry k: rank 0 has ..., rank 1 has ..." and
// the job aborts.
void agree_on_layout(const Communicator& comm, const std::vector<std::string>& lines, const std::string& what);

// The text of that disagreement, or empty when every rank's lines agree
// (separate from the abort, so it can be tested).
std::string layout_disagreement(const Communicator& comm, const std::vector<std::string>& lines,
                                const std::string& what);

// Every rank says whether it can go on: `problem` is empty, or why not.
// Returns when no rank has a problem; otherwise throws on every rank, so no
// rank goes ahead into a collective the others will never join: a rank with
// a problem throws it, the others an error quoting the ranks that had one.
void agree_all_can_proceed(const Communicator& comm, const std::string& problem, const std::string& what);

// The ranks whose `problem` is not empty, each with its text (cut to 1 KiB),
// in rank order; empty when none has one. Collective: one small sum when
// all is well.
struct RankProblem {
  int rank;
  std::string what;
};
std::vector<RankProblem> gather_problems(const Communicator& comm, const std::string& problem);
// "rank 1: <its problem>; ranks 0, 3: <the problem both had>".
std::string describe_problems(const std::vector<RankProblem>& problems);

// The index of this rank's GPU: its node-local rank's, or 0 where the
// process sees a single GPU (a launcher that gives each rank its own
// through CUDA_VISIBLE_DEVICES, as srun --gpus-per-task=1 does; or ranks
// sharing one, which only MPI's host messages allow, not NCCL).
int local_gpu_index(const Communicator& comm);

// cuda:local_gpu_index(), once every rank has checked that it sees that
// GPU (collective). `who` ("DataParallel") and `what` ("data parallelism")
// name the strategy in the error a rank without its GPU raises on every
// rank.
Device local_gpu(const Communicator& comm, const std::string& who, const std::string& what);

// Collective: every rank's GPU UUID (cuda_backend::device_uuid), or "" for
// a rank that passes no device (or one whose UUID cannot be read), so ranks
// can tell whether two of them drive the same physical GPU whatever index
// each process gives it.
std::vector<std::string> gather_gpu_uuids(const Communicator& comm, std::optional<int> device);

// Collective: whether every rank passes a device and no two drive the same
// physical GPU (what NCCL needs of a communicator's ranks).
bool every_rank_has_its_gpu(const Communicator& comm, std::optional<int> device);

class StallInspector {
 public:
  explicit StallInspector(Communicator comm) : comm_(std::move(comm)) {}
  // Every rank calls this at the same point of step `step`. The others
  // report their step to rank 0 and go on; rank 0 returns once all have
  // reported. Past DDL_STALL_TIMEOUT seconds rank 0 prints which ranks have
  // not arrived at `what` and aborts the job; a rank at another step is
  // named the same way. The report is one-way: a rank that waited for rank
  // 0's answer was measured waiting until rank 0's next MPI call (MPICH 4.0
  // on UCX delivered the answer only then), a whole forward and backward
  // pass. A rank 0 that never arrives leaves the others in the step's
  // collective, whose own bounded wait names it.
  void arrive(std::int64_t step, const std::string& what);

 private:
  Communicator comm_;
  std::int64_t reported_step_ = 0;  // the buffer of the report in flight
  Request report_;
};

}  // namespace ddl::parallel
