// Measuring the link between two ranks: ping-pongs of growing messages,
// each repeated a count rank 0 chooses and broadcasts (so every rank runs
// the same collectives), their one-way medians fitted to alpha + bytes x
// beta (cost_model.hpp's Link). ddl-model fits its machine with it; the
// pipeline's set-up prices the messages between stages with it.
//
//   const FittedLink link = measure_link(comm, 1, 0.005);  // rank 0 <-> rank 1
//   link.link.seconds(4 << 20);                             // a 4 MiB message, one way
#pragma once

#include <functional>
#include <vector>

#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/planning/cost_model.hpp>

namespace ddl::parallel {

struct FittedLink {
  cost::Link link;
  std::vector<double> bytes, seconds;          // the one-way times it was fitted to
  double median_error = 0.0, max_error = 0.0;  // |fit / measured - 1| over them
};

// Collective over `comm`: the link between rank 0 and `peer`, from
// ping-pongs of 8 bytes to `largest` bytes (each 4 times the last), each
// timed for about `budget` seconds (at least 5 times). Every rank returns
// rank 0's fit.
FittedLink measure_link(const Communicator& comm, int peer, double budget, std::size_t largest = std::size_t{16} << 20);

// How many times to repeat an operation that took `once` seconds to spend
// about `budget` (5 to 2000), rank 0's choice on every rank (collective).
int agreed_repetitions(const Communicator& comm, double once, double budget);

// The seconds `operation` takes, once.
double seconds_of(const std::function<void()>& operation);

// The median of `values` (the upper one of an even count); not empty.
double median(std::vector<double> values);

}  // namespace ddl::parallel
