// The collectives' costs (see cost_model.hpp). Each function follows the
// messages of its algorithm's file in parallel/collectives/, step by step
// (Step below: what one step's messages at once cost).
#include <ddl/parallel/planning/cost_model.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include <ddl/core/check.hpp>

namespace ddl::parallel::cost {
namespace {

// One step of an algorithm: messages of the same size sent at once, each
// from one rank to another. A message inside a node takes its pair's own
// path, but messages a rank sends at once share its memory bandwidth, and
// messages that leave a node share its network interface. So the step
// lasts as long as the busiest sender's intra-node messages or the busiest
// node's outgoing ones: why a ring, which sends one message out of each
// node per step, beats halving, whose every rank crosses the network at
// once in its first steps, on large messages across nodes.
class Step {
 public:
  explicit Step(const Machine& machine) : machine_(machine) {}

  void send(int from, int to) {
    const bool inside = from / machine_.ranks_per_node == to / machine_.ranks_per_node;
    auto& counts = inside ? from_rank_ : from_node_;
    const int key = inside ? from : from / machine_.ranks_per_node;
    auto found = std::find_if(counts.begin(), counts.end(), [&](const auto& entry) { return entry.first == key; });
    if (found == counts.end()) found = counts.insert(counts.end(), {key, 0});
    ++found->second;
  }

  double seconds(double bytes) const {
    const auto busiest = [](const std::vector<std::pair<int, int>>& counts) {
      int most = 0;
      for (const auto& entry : counts) most = std::max(most, entry.second);
      return most;
    };
    double seconds = 0.0;
    if (const int most = busiest(from_rank_); most > 0) {
      seconds = machine_.intra_node.alpha + most * bytes * machine_.intra_node.beta;
    }
    if (const int most = busiest(from_node_); most > 0) {
      seconds = std::max(seconds, machine_.network.alpha + most * bytes * machine_.network.beta);
    }
    return seconds;
  }

 private:
  const Machine& machine_;
  std::vector<std::pair<int, int>> from_rank_;  // (rank, messages it sends inside its node)
  std::vector<std::pair<int, int>> from_node_;  // (node, messages leaving it)
};

// One step of the ring: each rank sends a chunk of bytes/p to the next.
double ring_step_seconds(int p, double bytes, const Machine& machine) {
  Step step(machine);
  for (int r = 0; r < p; ++r) step.send(r, (r + 1) % p);
  return step.seconds(bytes / p);
}

double ring_seconds(int p, double bytes, const Machine& machine) {
  // The reduce-scatter, then the allgather: 2(p-1) steps of the same pattern.
  return 2.0 * (p - 1) * ring_step_seconds(p, bytes, machine) + (p - 1) * (bytes / p) * machine.gamma;
}

// Recursive halving / doubling over q = 2^floor(log2 p) ranks, the others
// folded in first (halving_doubling.cpp's virtual ranks): the fold's step
// (even ranks below 2·extra to the odd rank after them) and each halving
// step's seconds for `bytes`, each halving step moving half of the last.
struct HalvingSteps {
  bool folded = false;  // p is not a power of two
  double fold = 0.0;
  std::vector<std::pair<double, double>> halving;  // (seconds, bytes) per step
};

HalvingSteps halving_steps(int p, double bytes, const Machine& machine) {
  const int q = std::bit_floor(static_cast<unsigned>(p));
  const int extra = p - q;
  const auto real_rank = [&](int virtual_rank) {
    return virtual_rank < extra ? 2 * virtual_rank + 1 : virtual_rank + extra;
  };
  HalvingSteps steps;
  if (extra > 0) {
    Step fold(machine);
    for (int r = 0; r < 2 * extra; r += 2) fold.send(r, r + 1);
    steps.folded = true;
    steps.fold = fold.seconds(bytes);
  }
  double part = bytes;
  for (int mask = q / 2; mask >= 1; mask /= 2) {
    part /= 2.0;
    Step step(machine);
    for (int v = 0; v < q; ++v) step.send(real_rank(v), real_rank(v ^ mask));
    steps.halving.emplace_back(step.seconds(part), part);
  }
  return steps;
}

double halving_doubling_seconds(int p, double bytes, const Machine& machine) {
  const HalvingSteps steps = halving_steps(p, bytes, machine);
  // The folded ranks hand their whole buffer over, which is added, and get
  // the result back at the end.
  double seconds = steps.folded ? 2.0 * steps.fold + bytes * machine.gamma : 0.0;
  // Each halving step sends its part and adds the partner's; the doubling
  // step that mirrors it later sends the part back.
  for (const auto& [step, part] : steps.halving) seconds += 2.0 * step + part * machine.gamma;
  return seconds;
}

// The doubling half alone: a folded rank's chunk in, the doubling steps,
// and the whole back out.
double doubling_allgather_seconds(int p, double bytes, const Machine& machine) {
  const HalvingSteps steps = halving_steps(p, bytes, machine);
  const HalvingSteps chunk = halving_steps(p, bytes / p, machine);
  double seconds = chunk.fold + steps.fold;
  for (const auto& [step, part] : steps.halving) seconds += step;
  return seconds;
}

// Binomial reduce to rank 0, then binomial broadcast (tree.cpp): round
// `mask` pairs rank r with r - mask, up and then down.
double tree_seconds(int p, double bytes, const Machine& machine) {
  double seconds = 0.0;
  for (int mask = 1; mask < p; mask <<= 1) {
    Step reduce(machine), broadcast(machine);
    for (int r = mask; r < p; r += 2 * mask) {
      reduce.send(r, r - mask);
      broadcast.send(r - mask, r);
    }
    seconds += reduce.seconds(bytes) + broadcast.seconds(bytes) + bytes * machine.gamma;
  }
  return seconds;
}

// Rank 0 receives and adds every worker's buffer in turn, then sends the
// sum to all at once (naive.cpp).
double naive_seconds(int p, double bytes, const Machine& machine) {
  double seconds = 0.0;
  Step scatter(machine);
  for (int r = 1; r < p; ++r) {
    Step gather(machine);
    gather.send(r, 0);
    seconds += gather.seconds(bytes) + bytes * machine.gamma;
    scatter.send(0, r);
  }
  return seconds + scatter.seconds(bytes);
}

// Through one node's shared memory, a segment at a time between barriers
// (shared_memory.cpp): a rank copies in the parts the others sum, sums its
// own part from their slots, and copies the others' sums out. The bytes
// that cross between cores are the ring's, 2 (p-1)/p of the message, at
// the intra-node link's rate (which the ping-pong measures through the same
// shared memory), but with no message latencies: two barriers per segment
// instead.
double shared_memory_seconds(int p, double bytes, const Machine& machine) {
  const double segments = std::max(1.0, std::ceil(bytes / machine.shm_segment));
  const double others = (p - 1) * bytes / p;
  return 2.0 * segments * machine.barrier + 2.0 * others * machine.intra_node.beta + others * machine.gamma;
}

// A binomial reduce onto each node's leader, the ring among the leaders,
// and a binomial broadcast back (hierarchical.cpp): the tree's steps on the
// intra-node link of one node's ranks, then the ring's across nodes, where
// every message crosses the network but only one leaves each node per step.
double hierarchical_seconds(int p, double bytes, const Machine& machine) {
  const int local = std::min(p, machine.ranks_per_node);
  const int nodes = (p + local - 1) / local;
  Machine one_node = machine;
  one_node.ranks_per_node = local;
  Machine leaders = machine;
  leaders.ranks_per_node = 1;
  return tree_seconds(local, bytes, one_node) + (nodes > 1 ? ring_seconds(nodes, bytes, leaders) : 0.0);
}

// A number followed by a unit: the number and the rest, trimmed.
std::pair<double, std::string> split_unit(const std::string& text, const char* what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  DDL_CHECK(end != begin && std::isfinite(value) && value > 0.0, "{} '{}': expected a positive number and a unit", what,
            text);
  std::string unit(end);
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }), unit.end());
  return {value, unit};
}

}  // namespace

std::vector<AllreduceAlgorithm> modelled_algorithms() {
  return {AllreduceAlgorithm::ring,  AllreduceAlgorithm::rhd, AllreduceAlgorithm::tree,
          AllreduceAlgorithm::naive, AllreduceAlgorithm::shm, AllreduceAlgorithm::hierarchical};
}

std::optional<double> allreduce_seconds(AllreduceAlgorithm algorithm, int ranks, double bytes, const Machine& machine) {
  DDL_CHECK(ranks >= 1 && bytes >= 0.0 && machine.ranks_per_node >= 1,
            "allreduce_seconds: needs ranks >= 1, bytes >= 0 and ranks_per_node >= 1, got {}, {}, {}", ranks, bytes,
            machine.ranks_per_node);
  if (ranks == 1) return 0.0;
  switch (algorithm) {
    case AllreduceAlgorithm::ring:
      return ring_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::rhd:
      return halving_doubling_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::tree:
      return tree_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::naive:
      return naive_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::shm:
      if (ranks > machine.ranks_per_node) return std::nullopt;
      return shared_memory_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::hierarchical:
      return hierarchical_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::builtin:
    case AllreduceAlgorithm::automatic:
      return std::nullopt;
  }
  return std::nullopt;
}

std::vector<std::pair<AllreduceAlgorithm, double>> fastest_allreduces(std::span<const AllreduceAlgorithm> candidates,
                                                                      int ranks, double bytes, const Machine& machine) {
  std::vector<std::pair<AllreduceAlgorithm, double>> priced;
  for (const AllreduceAlgorithm algorithm : candidates) {
    if (const auto seconds = allreduce_seconds(algorithm, ranks, bytes, machine))
      priced.emplace_back(algorithm, *seconds);
  }
  // Stable: of equal times, the candidate named first.
  std::stable_sort(priced.begin(), priced.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return priced;
}

std::optional<double> allgather_seconds(AllreduceAlgorithm algorithm, int ranks, double bytes, const Machine& machine) {
  DDL_CHECK(ranks >= 1 && bytes >= 0.0 && machine.ranks_per_node >= 1,
            "allgather_seconds: needs ranks >= 1, bytes >= 0 and ranks_per_node >= 1, got {}, {}, {}", ranks, bytes,
            machine.ranks_per_node);
  if (ranks == 1) return 0.0;
  if (algorithm == AllreduceAlgorithm::ring) return (ranks - 1) * ring_step_seconds(ranks, bytes, machine);
  if (algorithm == AllreduceAlgorithm::rhd) return doubling_allgather_seconds(ranks, bytes, machine);
  return std::nullopt;
}

double parameter_server_seconds(int workers, int servers, double bytes, const Machine& machine) {
  DDL_CHECK(workers >= 1 && servers >= 1, "parameter_server_seconds: needs workers >= 1 and servers >= 1, got {}, {}",
            workers, servers);
  // The servers are the last ranks (parameter_server.cpp). Each takes one
  // push from every worker, in turn, while the workers each send their
  // whole gradient out; then the same back. Across nodes the servers of one
  // node share its interface.
  const double share = bytes / servers;
  const bool across = workers + servers > machine.ranks_per_node;
  const Link& link = across ? machine.network : machine.intra_node;
  const int sharing = across ? std::min(servers, machine.ranks_per_node) : 1;
  const double server = workers * (link.alpha + sharing * share * link.beta);
  const double worker = link.seconds(bytes);
  return 2.0 * std::max(server, worker) + workers * share * machine.gamma;
}

double data_parallel_efficiency(double compute_seconds, double allreduce_seconds, double overlap) {
  DDL_CHECK(compute_seconds > 0.0 && allreduce_seconds >= 0.0 && overlap >= 0.0 && overlap <= 1.0,
            "data_parallel_efficiency: needs compute > 0, allreduce >= 0 and overlap in [0, 1], got {}, {}, {}",
            compute_seconds, allreduce_seconds, overlap);
  return compute_seconds / (compute_seconds + (1.0 - overlap) * allreduce_seconds);
}

double pipeline_bubble(int stages, int micro_batches) {
  DDL_CHECK(stages >= 1 && micro_batches >= 1, "pipeline_bubble: needs stages >= 1 and micro-batches >= 1, got {}, {}",
            stages, micro_batches);
  return static_cast<double>(stages - 1) / (micro_batches + stages - 1);
}

double pipeline_speedup(int stages, int micro_batches) {
  return stages * (1.0 - pipeline_bubble(stages, micro_batches));
}

Link fit_link(std::span<const double> bytes, std::span<const double> seconds) {
  DDL_CHECK(bytes.size() == seconds.size() && bytes.size() >= 2,
            "fit_link: needs as many times as sizes, at least 2, got {} and {}", bytes.size(), seconds.size());
  // Weighted least squares: minimise sum w (alpha + beta x - t)^2, w = 1/t.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    DDL_CHECK(seconds[i] > 0.0 && bytes[i] >= 0.0, "fit_link: measurement {} ({} bytes in {} s) is not positive", i,
              bytes[i], seconds[i]);
    const double w = 1.0 / seconds[i];
    sw += w;
    sx += w * bytes[i];
    sy += w * seconds[i];
    sxx += w * bytes[i] * bytes[i];
    sxy += w * bytes[i] * seconds[i];
  }
  const double determinant = sw * sxx - sx * sx;
  DDL_CHECK(determinant > 1e-12 * sw * sxx, "fit_link: the sizes must not all be equal");
  Link link{(sxx * sy - sx * sxy) / determinant, (sw * sxy - sx * sy) / determinant};
  // A negative latency or bandwidth term is noise around zero.
  link.alpha = std::max(link.alpha, 0.0);
  link.beta = std::max(link.beta, 0.0);
  return link;
}

double parse_seconds(const std::string& text) {
  const auto [value, unit] = split_unit(text, "a time");
  if (unit.empty() || unit == "s") return value;
  if (unit == "ms") return value * 1e-3;
  if (unit == "us" || unit == "\u00b5s") return value * 1e-6;
  if (unit == "ns") return value * 1e-9;
  detail::fail("a time '{}': unknown unit '{}' (s, ms, us, ns)", text, unit);
}

double parse_bandwidth(const std::string& text) {
  const auto [value, unit] = split_unit(text, "a bandwidth");
  if (unit.empty()) return value;
  // [prefix][i](b|B)/s: decimal or binary prefix, bits or bytes.
  const auto slash = unit.find("/s");
  DDL_CHECK(slash != std::string::npos && slash + 2 == unit.size() && slash > 0,
            "a bandwidth '{}': expected a unit such as Gb/s, GB/s or GiB/s", text);
  const std::string quantity = unit.substr(0, slash);
  const char last = quantity.back();
  DDL_CHECK(last == 'b' || last == 'B', "a bandwidth '{}': the unit must end in b/s (bits) or B/s (bytes)", text);
  const double per_unit = last == 'b' ? 1.0 / 8.0 : 1.0;
  std::string prefix = quantity.substr(0, quantity.size() - 1);
  const bool binary = !prefix.empty() && prefix.back() == 'i';
  if (binary) prefix.pop_back();
  const std::string prefixes = "kMGT";
  double scale = 1.0;
  if (!prefix.empty()) {
    const auto index = prefixes.find(prefix == "K" ? 'k' : prefix.front());
    DDL_CHECK(prefix.size() == 1 && index != std::string::npos,
              "a bandwidth '{}': unknown prefix '{}' (k, M, G, T, optionally with i)", text, prefix);
    scale = std::pow(binary ? 1024.0 : 1000.0, static_cast<double>(index + 1));
  }
  return value * scale * per_unit;
}

}  // namespace ddl::parallel::cost
