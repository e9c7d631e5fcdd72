// Internal to parallel/: MPI's header, DDL_MPI_CHECK (a failed MPI call
// becomes a ddl::Error naming the call, MPI's own message and the rank, as
// llm.c's mpiCheck), the state behind a Communicator and the bounded wait
// every blocking operation uses. Not installed: public headers expose no MPI
// types, so programs using ddl need no MPI include path.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ddl::parallel::detail {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

// The shared-memory window of the shm allreduce (shared_memory.cpp), made
// on its first use. Rank r's part holds two buffers (double buffering) of
// `segment` floats; slots[q] points at rank q's part in this process.
struct SharedWindow {
  MPI_Win window = MPI_WIN_NULL;
  std::int64_t segment = 0;
  std::vector<float*> slots;
  std::uint64_t rounds = 0;  // segments reduced so far; its parity picks the buffer
};

struct CommunicatorState {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;  // freed with the state (split communicators)
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  // Each rank's hostname, gathered when the communicator is made: a stalled
  // wait names the host of the rank it waited for, which may be gone.
  std::vector<std::string> hosts;
  // Each rank's rank in MPI_COMM_WORLD: messages name ranks job-wide, as
  // the launcher and ddl-elastic number them, whatever communicator waited.
  std::vector<int> world_ranks;
  std::unique_ptr<SharedWindow> shared_window;
  // Communicator::node() and across_nodes(), made on first use.
  std::shared_ptr<CommunicatorState> node, across_nodes;
  // Bytes handed to MPI's point-to-point sends (Communicator::bytes_sent),
  // and the counter of the communicator this one is the node() or
  // across_nodes() of, which counts them too (null for the others).
  std::shared_ptr<std::atomic<std::int64_t>> bytes_sent = std::make_shared<std::atomic<std::int64_t>>(0);
  std::shared_ptr<std::atomic<std::int64_t>> parent_bytes_sent;
  // Set by the first stalled wait that probes which ranks are there (one
  // probe per communicator: a second would find the others' bytes taken).
  mutable std::atomic<bool> probed{false};
  void count_sent(std::size_t bytes) {
    bytes_sent->fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
    if (parent_bytes_sent) parent_bytes_sent->fetch_add(static_cast<std::int64_t>(bytes), std::memory_order_relaxed);
  }
  ~CommunicatorState();
};

// Prints "ddl: rank <r>: <message>" (r: this rank's job-wide rank) and
// ends the whole job (MPI_Abort on the communicator).
[[noreturn]] void abort_job(const CommunicatorState& comm, const std::string& message, int code);

// What a wait is for, as "send of 4096 bytes (tag 101)". Formatted only
// when the wait fails or stalls: a small message's whole exchange takes a
// microsecond or two, and formatting its description every time cost more.
struct Operation {
  const char* name;         // "send", "barrier", "MPI_Allreduce"
  std::int64_t count = -1;  // how many units it moves, or -1 for none
  const char* unit = "bytes";
  int tag = -1;  // the message tag, or -1 for none
  std::string describe() const;
};

// Waits for `request`, polling and yielding (so oversubscribed ranks still
// progress); past config::stall_timeout_seconds() prints what it waited for
// and from whom (`peer`, or -1 for a collective) and aborts every rank.
void wait_bounded(MPI_Request& request, const CommunicatorState& comm, const Operation& what, int peer,
                  MPI_Status* status = MPI_STATUS_IGNORE);
// The same for several requests at once (MPI_Testall); `statuses` has one
// entry per request, or is MPI_STATUSES_IGNORE.
void wait_bounded(std::span<MPI_Request> requests, const CommunicatorState& comm, const Operation& what, int peer,
                  MPI_Status* statuses = MPI_STATUSES_IGNORE);

// Which ranks run on which node, in rank order: "ranks 0-1 on node-a,
// ranks 2-3 on node-b" (hostnames; a rank alone: "rank 4 on node-c").
std::string describe_nodes(const CommunicatorState& comm);

}  // namespace ddl::parallel::detail

#define DDL_MPI_CHECK(call)                                                              \
  do {                                                                                   \
    const int ddl_mpi_code = (call);                                                     \
    if (ddl_mpi_code != MPI_SUCCESS) {                                                   \
      ::ddl::parallel::detail::throw_mpi_error(ddl_mpi_code, #call, __FILE__, __LINE__); \
    }                                                                                    \
  } while (false)
