// ProcessGrid (see process_grid.hpp).
#include <ddl/parallel/strategies/process_grid.hpp>

#include <ddl/core/check.hpp>

namespace ddl::parallel {

ProcessGrid ProcessGrid::split(const Communicator& world, int data_parallel, int stages, int tensor_ranks) {
  DDL_CHECK(
      data_parallel >= 1 && stages >= 1 && tensor_ranks >= 1 && data_parallel * stages * tensor_ranks == world.size(),
      "ProcessGrid: {} data-parallel x {} pipeline x {} tensor ranks need {} ranks; this job has {}", data_parallel,
      stages, tensor_ranks, data_parallel * stages * tensor_ranks, world.size());
  const int rank = world.rank();
  const int t = rank % tensor_ranks, s = rank / tensor_ranks % stages, d = rank / (tensor_ranks * stages);
  // Each split's colour names the line, its key orders the ranks along it.
  return {world, world.split(d * tensor_ranks + t, s), world.split(s * tensor_ranks + t, d),
          world.split(d * stages + s, t)};
}

}  // namespace ddl::parallel
