// The cost model's machine (cost_model.hpp) measured on the job that will
// use it: the links inside a node and between nodes, the local sum's rate
// and a node barrier's time; and each allreduce algorithm's time at the
// job's rank count, to set beside the model's prediction. ddl-model prints
// and checks them; `--allreduce auto` (allreduce_choice.hpp) picks the
// algorithm they predict fastest. Collective: every rank calls each
// function, with 2 or more ranks; every rank returns rank 0's results.
#pragma once

#include <cstddef>
#include <optional>

#include <ddl/parallel/collectives/allreduce_algorithm.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/link_measure.hpp>
#include <ddl/parallel/planning/cost_model.hpp>

namespace ddl::parallel {

struct MeasuredMachine {
  FittedLink intra_node;              // rank 0 <-> rank 1 (on one node)
  std::optional<FittedLink> network;  // rank 0 <-> the first rank on another node, if any
  cost::Machine machine;              // the above with gamma and the barrier: the model of this job
};

// Ping-pongs of up to `largest` bytes, a local reduction and barriers,
// each timed for about `budget` seconds. Where rank 0 is alone on its node
// there is no intra-node link to measure: the network's stands for it.
MeasuredMachine measure_machine(const Communicator& comm, double budget, std::size_t largest = std::size_t{16} << 20);

// Seconds per allreduce of `bytes` with `algorithm` over the job's ranks:
// the median over repetitions of the slowest rank's time.
double measure_allreduce(const Communicator& comm, AllreduceAlgorithm algorithm, double bytes, double budget);

}  // namespace ddl::parallel
