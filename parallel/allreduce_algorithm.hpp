// The allreduce algorithms by name (collectives/collectives.hpp runs them;
// cost_model.hpp prices them). Single-process: no MPI, so the cost model
// and option parsing exist in every build.
#pragma once

#include <string>
#include <vector>

namespace ddl::parallel {

enum class AllreduceAlgorithm { ring, rhd, tree, naive, shm, builtin };

// "ring", "rhd", "tree", "naive", "shm", "builtin".
std::string algorithm_name(AllreduceAlgorithm algorithm);
// The inverse; throws ddl::Error listing the names for an unknown one.
AllreduceAlgorithm parse_allreduce(const std::string& name);
std::vector<AllreduceAlgorithm> all_allreduce_algorithms();

}  // namespace ddl::parallel
