// The engine's own collectives, MPI_Allreduce (MPICH picks among recursive
// doubling, Rabenseifner and ring by message size), MPI_Reduce_scatter and
// MPI_Allgatherv, for comparison and for users who want the fastest tuned
// path. Non-blocking plus the bounded wait, so a missing rank is reported
// instead of hanging.
#include <ddl/parallel/collectives/collectives.hpp>

#include <algorithm>
#include <climits>
#include <vector>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/transport.hpp>
#include <ddl/parallel/communication/mpi_internal.hpp>

namespace ddl::parallel {

void builtin_allreduce(const Communicator& comm, std::span<float> data) {
  if (comm.size() == 1) return;
  const auto& state = *comm.state();
  const std::size_t total = data.size();
  // MPI counts are ints: reduce pieces of at most INT_MAX elements.
  for (std::size_t first = 0; first < total; first += INT_MAX) {
    const int count = static_cast<int>(std::min<std::size_t>(INT_MAX, total - first));
    MPI_Request request = MPI_REQUEST_NULL;
    DDL_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data.data() + first, count, MPI_FLOAT, MPI_SUM, state.comm, &request));
    detail::wait_bounded(request, state, {"MPI_Allreduce", count, "floats"}, -1);
  }
}

namespace {

// The chunks' element counts and offsets as MPI's ints.
struct ChunkCounts {
  std::vector<int> counts, offsets;
};
ChunkCounts chunk_counts(std::int64_t n, int p, const char* what, bool offsets_too) {
  ChunkCounts chunks;
  for (int r = 0; r < p; ++r) {
    const ChunkRange chunk = chunk_range(n, p, r);
    DDL_CHECK(chunk.size() <= INT_MAX && (!offsets_too || chunk.end <= INT_MAX),
              "{}: {} floats over {} ranks exceed MPI's int counts; use ring or rhd", what, n, p);
    chunks.counts.push_back(static_cast<int>(chunk.size()));
    chunks.offsets.push_back(static_cast<int>(offsets_too ? chunk.begin : 0));
  }
  return chunks;
}

}  // namespace

void builtin_reduce_scatter(const Communicator& comm, std::span<float> data, ReduceOp op) {
  if (comm.size() == 1) return;
  const auto& state = *comm.state();
  const auto n = static_cast<std::int64_t>(data.size());
  const ChunkCounts chunks = chunk_counts(n, comm.size(), "MPI_Reduce_scatter", false);
  const ChunkRange mine = chunk_range(n, comm.size(), comm.rank());
  // MPI writes the chunk at the start of its receive buffer: one of its own.
  std::vector<float> reduced(static_cast<std::size_t>(mine.size()));
  MPI_Request request = MPI_REQUEST_NULL;
  DDL_MPI_CHECK(MPI_Ireduce_scatter(data.data(), reduced.data(), chunks.counts.data(), MPI_FLOAT, MPI_SUM, state.comm,
                                    &request));
  detail::wait_bounded(request, state, {"MPI_Reduce_scatter", n, "floats"}, -1);
  std::copy(reduced.begin(), reduced.end(), data.begin() + mine.begin);
  if (op == ReduceOp::average) detail::scale(data.data() + mine.begin, mine.size(), detail::average_factor(comm.size()));
}

void builtin_allgather(const Communicator& comm, std::span<float> data) {
  if (comm.size() == 1) return;
  const auto& state = *comm.state();
  const auto n = static_cast<std::int64_t>(data.size());
  const ChunkCounts chunks = chunk_counts(n, comm.size(), "MPI_Allgatherv", true);
  MPI_Request request = MPI_REQUEST_NULL;
  DDL_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data.data(), chunks.counts.data(),
                                chunks.offsets.data(), MPI_FLOAT, state.comm, &request));
  detail::wait_bounded(request, state, {"MPI_Allgatherv", n, "floats"}, -1);
}

}  // namespace ddl::parallel
