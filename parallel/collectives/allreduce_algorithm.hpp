// The allreduce algorithms by name (collectives/collectives.hpp runs them;
// cost_model.hpp prices them). Single-process: no MPI, so the cost model
// and option parsing exist in every build.
#pragma once

#include <string>
#include <vector>

namespace ddl::parallel {

enum class AllreduceAlgorithm { ring, rhd, tree, naive, shm, builtin };

// What an allreduce leaves on every rank: the sum, or the sum divided by
// the number of ranks (MPI_SUM, ncclSum / ncclAvg). Our algorithms divide
// at the one point where a part of the sum is complete on one rank (the
// ring's chunk owner, the tree's root), so averaging costs n/p multiplies
// per rank instead of a pass over the whole buffer.
enum class ReduceOp { sum, average };

// "ring", "rhd", "tree", "naive", "shm", "builtin".
std::string algorithm_name(AllreduceAlgorithm algorithm);
// The inverse; throws ddl::Error listing the names for an unknown one.
AllreduceAlgorithm parse_allreduce(const std::string& name);
std::vector<AllreduceAlgorithm> all_allreduce_algorithms();

}  // namespace ddl::parallel
