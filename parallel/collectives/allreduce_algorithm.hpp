// The allreduce algorithms by name (collectives/collectives.hpp runs them;
// cost_model.hpp prices them). Single-process: no MPI, so the cost model
// and option parsing exist in every build.
#pragma once

#include <string>
#include <vector>

namespace ddl::parallel {

// `automatic` ("auto") is not an algorithm but a request: make_setup
// (setup.hpp) replaces it by the one the cost model predicts fastest on
// the job's measured links (allreduce_choice.hpp); the collectives refuse it.
enum class AllreduceAlgorithm { ring, rhd, tree, naive, shm, hierarchical, builtin, automatic };

// What an allreduce leaves on every rank: the sum, or the sum divided by
// the number of ranks (MPI_SUM, ncclSum / ncclAvg). Our algorithms divide
// at the one point where a part of the sum is complete on one rank (the
// ring's chunk owner, the tree's root), so averaging costs n/p multiplies
// per rank instead of a pass over the whole buffer.
enum class ReduceOp { sum, average };

// "ring", "rhd", "tree", "naive", "shm", "hierarchical", "builtin", "auto".
std::string algorithm_name(AllreduceAlgorithm algorithm);
// The inverse; throws ddl::Error listing the names for an unknown one.
AllreduceAlgorithm parse_allreduce(const std::string& name);
// The algorithms that run (every one but automatic), and what a user may
// ask for (those and automatic).
std::vector<AllreduceAlgorithm> all_allreduce_algorithms();
std::vector<AllreduceAlgorithm> allreduce_choices();
// Whether the algorithm also runs on GPU buffers over NCCL. shm reduces
// host memory through an MPI window; hierarchical runs over the node's and
// the leaders' MPI communicators (NCCL's own, builtin, is node-aware
// already). Where it does not, a GPU's buffers go through host memory.
bool runs_on_gpu(AllreduceAlgorithm algorithm);

}  // namespace ddl::parallel
