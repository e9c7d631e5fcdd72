// See measure_machine.hpp. Every timed loop repeats its operation a count rank 0
// chooses from a first try and broadcasts, so that all ranks run the same
// number of collectives; the median of the repetitions damps the machine's
// noise.
#include <ddl/parallel/collectives/measure_machine.hpp>

#include <algorithm>
#include <functional>

#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/collectives/local_reduce.hpp>
#include <ddl/parallel/communication/link_measure.hpp>

namespace ddl::parallel {
namespace {

// The median over `repetitions` of `operation`'s time, the slowest rank's
// each time (a collective ends when its last rank does).
double median_slowest(const Communicator& comm, const std::function<void()>& operation, double budget) {
  const int repetitions = agreed_repetitions(comm, seconds_of(operation), budget);
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    comm.barrier();
    const double mine = seconds_of(operation);
    // Every rank's time, each in its own slot of one sum.
    std::vector<double> all(static_cast<std::size_t>(comm.size()), 0.0);
    all[static_cast<std::size_t>(comm.rank())] = mine;
    comm.sum_doubles(all);
    times.push_back(*std::max_element(all.begin(), all.end()));
  }
  return median(times);
}

}  // namespace

MeasuredMachine measure_machine(const Communicator& comm, double budget, std::size_t largest) {
  MeasuredMachine measured;
  // The ranks of node 0 are the first local_size ones when the launcher
  // fills nodes in order, as mpiexec and srun do by default.
  std::vector<double> node_size{static_cast<double>(comm.local_size())};
  comm.broadcast_bytes(std::as_writable_bytes(std::span(node_size)), 0);
  const int per_node = static_cast<int>(node_size[0]);
  if (per_node < comm.size()) measured.network = measure_link(comm, per_node, budget, largest);
  measured.intra_node = per_node > 1 ? measure_link(comm, 1, budget, largest) : *measured.network;

  cost::Machine& machine = measured.machine;
  machine.intra_node = measured.intra_node.link;
  machine.network = measured.network ? measured.network->link : measured.intra_node.link;
  machine.ranks_per_node = per_node;
  // The reduction rate at 16 MiB, past the caches, as the collectives
  // stream through gradients of that size.
  const std::size_t count = std::size_t{4} << 20;
  std::vector<float> destination(count, 1.0f), source(count, 2.0f);
  const double bytes = static_cast<double>(count * sizeof(float));
  machine.gamma = median_slowest(
                      comm, [&] { detail::add_into(destination.data(), source.data(), count); }, budget) /
                  bytes;
  machine.barrier = median_slowest(
      comm, [&] { comm.barrier(); }, budget);
  return measured;
}

double measure_allreduce(const Communicator& comm, AllreduceAlgorithm algorithm, double bytes, double budget) {
  std::vector<float> data(static_cast<std::size_t>(bytes / sizeof(float)), 1.0f);
  return median_slowest(
      comm, [&] { allreduce(comm, std::span<float>(data), algorithm); }, budget);
}

}  // namespace ddl::parallel
