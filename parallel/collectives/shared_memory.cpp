// Allreduce through shared memory, for ranks on one node: an MPI-3 window
// (MPI_Win_allocate_shared) maps every rank's part of one allocation into
// every rank's address space, so ranks read each other's values directly
// instead of sending messages. A message between two processes costs two
// copies (into the library's shared cell, out of it) plus the handshakes of
// its protocol; here each value is copied into the window once and read
// once by the rank that reduces it.
//
// The buffer is reduced one segment (DDL_SHM_SEGMENT bytes) at a time:
//
//   1. the segment is cut into p parts (chunk_range); every rank copies the
//      parts the others will sum into its slot of the window;
//   2. barrier: all slots are filled;
//   3. rank r sums part r: its own values plus those in the others' slots,
//      into its slot (for the others to read) and its own buffer;
//   4. barrier: all parts are summed;
//   5. every rank copies each part q != r from rank q's slot.
//
// Per rank that is 2 barriers, and with 2 ranks 2.5n values read and 2n
// written for n elements. (Storing step 3's sums in both places in one pass
// would read 2n; it measured no faster in six alternating runs at 2-8 MiB.)
// Slots hold two buffers used in turn: a rank may refill buffer b for the
// next segment while a slower rank still copies the previous segment out of
// the other one, and barrier 2 of the next segment is passed only once every
// rank has finished step 5 of the one before the buffer comes round again.
// The turn is counted across calls, so consecutive allreduces alternate too.
//
// The memory model: the window stays locked by every rank (lock_all) and
// each barrier is fenced with MPI_Win_sync on both sides, the usual idiom
// for load/store access to a shared window (MPI-3.1 section 11.7).
#include <ddl/parallel/collectives/collectives.hpp>

#include <algorithm>
#include <cstring>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/local_reduce.hpp>
#include <ddl/parallel/config.hpp>
#include <ddl/parallel/communication/mpi_internal.hpp>

namespace ddl::parallel {
namespace {

using detail::CommunicatorState;
using detail::SharedWindow;

SharedWindow& shared_window(CommunicatorState& comm) {
  if (comm.shared_window) return *comm.shared_window;
  DDL_CHECK(comm.local_size == comm.size,
            "shm allreduce: needs every rank on one node, but the {} ranks are on several ({}); "
            "use ring (or rhd) across nodes",
            comm.size, detail::describe_nodes(comm));
  auto window = std::make_unique<SharedWindow>();
  window->segment = std::max<std::int64_t>(config::shm_segment_bytes() / static_cast<std::int64_t>(sizeof(float)), 1);
  const auto bytes = static_cast<MPI_Aint>(2 * window->segment * static_cast<std::int64_t>(sizeof(float)));
  void* mine = nullptr;
  DDL_MPI_CHECK(MPI_Win_allocate_shared(bytes, sizeof(float), MPI_INFO_NULL, comm.comm, &mine, &window->window));
  window->slots.resize(static_cast<std::size_t>(comm.size));
  for (int q = 0; q < comm.size; ++q) {
    MPI_Aint size = 0;
    int unit = 0;
    void* base = nullptr;
    DDL_MPI_CHECK(MPI_Win_shared_query(window->window, q, &size, &unit, &base));
    window->slots[static_cast<std::size_t>(q)] = static_cast<float*>(base);
  }
  DDL_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window->window));
  comm.shared_window = std::move(window);
  return *comm.shared_window;
}

void copy(float* to, const float* from, std::int64_t n) {
  std::memcpy(to, from, static_cast<std::size_t>(n) * sizeof(float));
}

// Every rank's stores before it are visible to every rank's loads after it.
void fenced_barrier(const CommunicatorState& comm, const SharedWindow& window, const char* what) {
  DDL_MPI_CHECK(MPI_Win_sync(window.window));
  MPI_Request request = MPI_REQUEST_NULL;
  DDL_MPI_CHECK(MPI_Ibarrier(comm.comm, &request));
  detail::wait_bounded(request, comm, {what}, -1);
  DDL_MPI_CHECK(MPI_Win_sync(window.window));
}

}  // namespace

void shared_memory_allreduce(const Communicator& comm, std::span<float> data) {
  CommunicatorState& state = *comm.state();
  const int p = state.size, r = state.rank;
  if (p == 1 || data.empty()) return;
  SharedWindow& window = shared_window(state);
  const auto n = static_cast<std::int64_t>(data.size());
  for (std::int64_t first = 0; first < n; first += window.segment) {
    const std::int64_t count = std::min(window.segment, n - first);
    const std::int64_t buffer = static_cast<std::int64_t>(window.rounds++ % 2) * window.segment;
    const auto slot = [&](int q) { return window.slots[static_cast<std::size_t>(q)] + buffer; };

    float* segment = data.data() + first;

    for (int q = 0; q < p; ++q) {
      const ChunkRange theirs = chunk_range(count, p, q);
      if (q != r) copy(slot(r) + theirs.begin, segment + theirs.begin, theirs.size());
    }
    fenced_barrier(state, window, "shm allreduce: waiting for every rank's segment");

    const ChunkRange mine = chunk_range(count, p, r);
    float* sum = slot(r) + mine.begin;
    const float* partial = segment + mine.begin;  // this rank's own values come first
    for (int q = 0; q < p; ++q) {
      if (q == r) continue;
      detail::add(partial, slot(q) + mine.begin, sum, mine.size());
      partial = sum;
    }
    copy(segment + mine.begin, sum, mine.size());
    fenced_barrier(state, window, "shm allreduce: waiting for every rank's sum");

    for (int q = 0; q < p; ++q) {
      const ChunkRange theirs = chunk_range(count, p, q);
      if (q != r) copy(segment + theirs.begin, slot(q) + theirs.begin, theirs.size());
    }
  }
}

}  // namespace ddl::parallel
