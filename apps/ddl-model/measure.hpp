// ddl-model's measurements (run under mpiexec with 2 or more ranks): the
// machine's alpha, beta and gamma, and each allreduce algorithm's time at
// the job's rank count, to set beside the model's prediction. Collective:
// every rank calls each function; rank 0 holds the results.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ddl/parallel/collectives/allreduce_algorithm.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/link_measure.hpp>
#include <ddl/parallel/planning/cost_model.hpp>

namespace ddl::apps {

using parallel::FittedLink;

struct Measured {
  FittedLink intra_node;              // rank 0 <-> rank 1 (on one node)
  std::optional<FittedLink> network;  // rank 0 <-> the first rank on another node, if any
  parallel::cost::Machine machine;    // the above with gamma and the barrier: the model of this job
};

// Ping-pongs, a local reduction and barriers, each timed for about
// `budget` seconds.
Measured measure_machine(const parallel::Communicator& comm, double budget);

// Seconds per allreduce of `bytes` with `algorithm` over the job's ranks:
// the median over repetitions of the slowest rank's time.
double measure_allreduce(const parallel::Communicator& comm, parallel::AllreduceAlgorithm algorithm, double bytes,
                         double budget);

}  // namespace ddl::apps
