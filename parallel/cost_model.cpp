// The collectives' costs (see cost_model.hpp). Each function follows the
// messages of its algorithm's file in parallel/collectives/, step by step;
// a step in which several pairs of ranks exchange at once costs what its
// slowest pair's link costs.
#include <ddl/parallel/cost_model.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include <ddl/core/check.hpp>

namespace ddl::parallel::cost {
namespace {

// The slower of two links for a message of `bytes` (a step is bound by its
// slowest pair).
const Link& slower(const Link& a, const Link& b, double bytes) { return b.seconds(bytes) > a.seconds(bytes) ? b : a; }

double ring_seconds(int p, double bytes, const Machine& machine) {
  // The ring's edges r -> r+1: one crosses the network whenever the ranks
  // span nodes, and every step waits for it.
  const Link& link = p > machine.ranks_per_node ? machine.network : machine.intra_node;
  const double steps = 2.0 * (p - 1);
  return steps * link.seconds(bytes / p) + (p - 1) * (bytes / p) * machine.gamma;
}

// Recursive halving / doubling over q = 2^floor(log2 p) ranks, the others
// folded in first (halving_doubling.cpp's virtual ranks).
double halving_doubling_seconds(int p, double bytes, const Machine& machine) {
  const int q = std::bit_floor(static_cast<unsigned>(p));
  const int extra = p - q;
  const auto real_rank = [&](int virtual_rank) { return virtual_rank < extra ? 2 * virtual_rank + 1 : virtual_rank + extra; };
  double seconds = 0.0;
  if (extra > 0) {
    // Even ranks below 2·extra hand their whole buffer to the odd rank
    // after them, which adds it, and get the result back at the end.
    const Link& fold = machine.link(0, 1);
    seconds += 2.0 * fold.seconds(bytes) + bytes * machine.gamma;
  }
  double part = bytes;
  for (int mask = q / 2; mask >= 1; mask /= 2) {
    part /= 2.0;
    Link step = machine.intra_node;
    for (int v = 0; v < q; ++v) step = slower(step, machine.link(real_rank(v), real_rank(v ^ mask)), part);
    // The halving step sends `part` and adds the partner's; the doubling
    // step that mirrors it later sends `part` back.
    seconds += 2.0 * step.seconds(part) + part * machine.gamma;
  }
  return seconds;
}

// Binomial reduce to rank 0, then binomial broadcast (tree.cpp).
double tree_seconds(int p, double bytes, const Machine& machine) {
  double seconds = 0.0;
  for (int mask = 1; mask < p; mask <<= 1) {
    Link step = machine.intra_node;
    for (int r = mask; r < p; r += 2 * mask) step = slower(step, machine.link(r, r - mask), bytes);
    seconds += 2.0 * step.seconds(bytes) + bytes * machine.gamma;
  }
  return seconds;
}

// Rank 0 receives and adds every worker's buffer in turn, then sends the
// sum to all at once through its one link (naive.cpp).
double naive_seconds(int p, double bytes, const Machine& machine) {
  double seconds = 0.0;
  Link widest = machine.intra_node;
  for (int r = 1; r < p; ++r) {
    seconds += machine.link(0, r).seconds(bytes) + bytes * machine.gamma;
    widest = slower(widest, machine.link(0, r), bytes);
  }
  return seconds + widest.alpha + (p - 1) * bytes * widest.beta;
}

// Through one node's shared memory, a segment at a time between barriers
// (shared_memory.cpp).
double shared_memory_seconds(int p, double bytes, const Machine& machine) {
  const double segments = std::max(1.0, std::ceil(bytes / machine.shm_segment));
  const double others = (p - 1) * bytes / p;  // the parts this rank copies in and out
  return 2.0 * segments * machine.barrier + 2.0 * others * machine.copy_beta + others * machine.gamma;
}

// A number followed by a unit: the number and the rest, trimmed.
std::pair<double, std::string> split_unit(const std::string& text, const char* what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  DDL_CHECK(end != begin && std::isfinite(value) && value > 0.0, "{} '{}': expected a positive number and a unit",
            what, text);
  std::string unit(end);
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }), unit.end());
  return {value, unit};
}

}  // namespace

std::vector<AllreduceAlgorithm> modelled_algorithms() {
  return {AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd, AllreduceAlgorithm::tree, AllreduceAlgorithm::naive,
          AllreduceAlgorithm::shm};
}

std::optional<double> allreduce_seconds(AllreduceAlgorithm algorithm, int ranks, double bytes, const Machine& machine) {
  DDL_CHECK(ranks >= 1 && bytes >= 0.0 && machine.ranks_per_node >= 1,
            "allreduce_seconds: needs ranks >= 1, bytes >= 0 and ranks_per_node >= 1, got {}, {}, {}", ranks, bytes,
            machine.ranks_per_node);
  if (ranks == 1) return 0.0;
  switch (algorithm) {
    case AllreduceAlgorithm::ring: return ring_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::rhd: return halving_doubling_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::tree: return tree_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::naive: return naive_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::shm:
      if (ranks > machine.ranks_per_node) return std::nullopt;
      return shared_memory_seconds(ranks, bytes, machine);
    case AllreduceAlgorithm::builtin: return std::nullopt;
  }
  return std::nullopt;
}

double parameter_server_seconds(int workers, int servers, double bytes, const Machine& machine) {
  DDL_CHECK(workers >= 1 && servers >= 1, "parameter_server_seconds: needs workers >= 1 and servers >= 1, got {}, {}",
            workers, servers);
  // The servers are the last ranks (parameter_server.cpp); a server's link
  // to its farthest worker bounds its turns.
  const Link& link = machine.link(0, workers + servers - 1);
  const double share = bytes / servers;
  return workers * (2.0 * link.seconds(share) + share * machine.gamma);
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
  // Weighted least squares: minimise sum w (alpha + beta x - t)^2, w = 1/t^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    DDL_CHECK(seconds[i] > 0.0 && bytes[i] >= 0.0, "fit_link: measurement {} ({} bytes in {} s) is not positive", i,
              bytes[i], seconds[i]);
    const double w = 1.0 / (seconds[i] * seconds[i]);
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
