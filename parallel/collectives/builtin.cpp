// The engine's own allreduce, MPI_Allreduce (MPICH picks among recursive
// doubling, Rabenseifner and ring by message size), for comparison and for
// users who want the fastest tuned path. Non-blocking plus the bounded wait,
// so a missing rank is reported instead of hanging.
#include <ddl/parallel/collectives/collectives.hpp>

#include <algorithm>
#include <climits>

#include <ddl/core/check.hpp>
#include <ddl/parallel/mpi_internal.hpp>

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

}  // namespace ddl::parallel
