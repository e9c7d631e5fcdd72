// See allreduce_choice.hpp.
#include <ddl/parallel/collectives/allreduce_choice.hpp>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/measure_machine.hpp>
#include <ddl/parallel/planning/cost_model.hpp>

namespace ddl::parallel {
namespace {

// Each measurement's time: enough repetitions of the small messages to
// damp the noise, few of the largest, which last long on a slow link.
constexpr double kBudgetSeconds = 0.002;
// The largest ping-pong: past the latency on any link, short on a slow one
// (4 MiB at 1 Gbit/s: about 34 ms each way).
constexpr std::size_t kLargestBytes = std::size_t{4} << 20;

std::string describe_link(const cost::Link& link) {
  return fmt::format("{:.3g} GB/s after {:.3g} us", 1e-9 / link.beta, link.alpha * 1e6);
}

std::string describe_seconds(double seconds) {
  return seconds >= 1.0 ? fmt::format("{:.3g} s", seconds) : fmt::format("{:.3g} ms", seconds * 1e3);
}

}  // namespace

AllreduceChoice choose_allreduce(const Communicator& comm, double bytes,
                                 std::span<const AllreduceAlgorithm> candidates) {
  if (comm.size() == 1) return {AllreduceAlgorithm::ring, "one rank: nothing to reduce"};
  const MeasuredMachine measured = measure_machine(comm, kBudgetSeconds, kLargestBytes);
  const auto priced = cost::fastest_allreduces(candidates, comm.size(), bytes, measured.machine);
  DDL_CHECK(!priced.empty(), "choose_allreduce: the cost model prices none of the {} candidates", candidates.size());
  const int per_node = measured.machine.ranks_per_node;
  std::string reason = fmt::format("{} ranks, {} per node ({}); ", comm.size(), per_node, comm.describe_nodes());
  if (measured.network) reason += fmt::format("measured {} between nodes, ", describe_link(measured.network->link));
  if (per_node > 1) reason += fmt::format("{} inside a node, ", describe_link(measured.intra_node.link));
  std::vector<std::string> times;
  for (const auto& [algorithm, seconds] : priced) {
    times.push_back(fmt::format("{} {}", algorithm_name(algorithm), describe_seconds(seconds)));
  }
  reason += fmt::format("predicted for {:.3g} MiB: {}", bytes / (1 << 20), fmt::join(times, ", "));
  return {priced.front().first, reason};
}

}  // namespace ddl::parallel
