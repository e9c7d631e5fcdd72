// `--allreduce auto`: the algorithm the cost model (cost_model.hpp) predicts
// fastest for this job, on its links measured at start-up
// (measure_machine.hpp), for the message it will reduce most (a gradient
// bucket). The answer says why, in numbers, so a user sees the links the
// job found: a rate-limited link between nodes shows in it.
//
//   const AllreduceChoice choice = choose_allreduce(comm, 25 << 20, cost::modelled_algorithms());
//   // choice.algorithm: hierarchical; choice.reason: "4 ranks on 2 nodes (2 per node); measured ..."
#pragma once

#include <span>
#include <string>

#include <ddl/parallel/collectives/allreduce_algorithm.hpp>
#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

struct AllreduceChoice {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring;
  std::string reason;
};

// Collective over `comm`: measures its machine (about a second at most,
// less on fast links), prices every one of `candidates` the model covers
// for an allreduce of `bytes` and returns the fastest, the same on every
// rank (rank 0's measurements). One rank: the ring, which then sends
// nothing. No candidate the model prices: ddl::Error.
AllreduceChoice choose_allreduce(const Communicator& comm, double bytes,
                                 std::span<const AllreduceAlgorithm> candidates);

}  // namespace ddl::parallel
