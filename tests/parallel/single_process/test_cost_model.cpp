// The collectives' cost model (parallel/planning/cost_model.hpp): each algorithm's
// time equals its textbook formula where every link is the same, steps
// across nodes take the network's link, the orderings every lesson relies on
// hold (latency-bound sizes favour few steps, bandwidth-bound ones the
// ring), and the fit and the unit parsers are exact.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <ddl/parallel/planning/cost_model.hpp>

#include "support/test_data.hpp"

using namespace ddl::parallel;
using namespace ddl::parallel::cost;
using ddl::test::throws_error_mentioning;

namespace {

// One node of 4096 ranks with round numbers: alpha 5 us, 1 GB/s, 4 GB/s reduction.
Machine flat() {
  Machine machine;
  machine.intra_node = {5e-6, 1e-9};
  machine.network = {50e-6, 1e-8};
  machine.ranks_per_node = 4096;
  machine.gamma = 0.25e-9;
  machine.barrier = 2e-6;
  return machine;
}

double modelled(AllreduceAlgorithm algorithm, int ranks, double bytes, const Machine& machine) {
  const auto seconds = allreduce_seconds(algorithm, ranks, bytes, machine);
  REQUIRE(seconds.has_value());
  return *seconds;
}

}  // namespace

TEST_CASE("cost model: every algorithm's time is its textbook formula on one kind of link") {
  const Machine machine = flat();
  const double a = machine.intra_node.alpha, b = machine.intra_node.beta, g = machine.gamma;
  for (const int p : {2, 3, 4, 5, 8, 13, 64}) {
    for (const double m : {0.0, 4.0, 4096.0, 3e6, 256e6}) {
      CAPTURE(p);
      CAPTURE(m);
      const double log_p = std::ceil(std::log2(p));
      CHECK(modelled(AllreduceAlgorithm::ring, p, m, machine) ==
            doctest::Approx(2 * (p - 1) * (a + m / p * b) + (p - 1) * m / p * g).epsilon(1e-12));
      CHECK(modelled(AllreduceAlgorithm::tree, p, m, machine) ==
            doctest::Approx(2 * log_p * (a + m * b) + log_p * m * g).epsilon(1e-12));
      CHECK(modelled(AllreduceAlgorithm::naive, p, m, machine) ==
            doctest::Approx((p - 1) * (a + m * b + m * g) + a + (p - 1) * m * b).epsilon(1e-12));
      const int q = 1 << static_cast<int>(std::floor(std::log2(p)));
      const double fold = p == q ? 0.0 : 2 * (a + m * b) + m * g;
      CHECK(modelled(AllreduceAlgorithm::rhd, p, m, machine) ==
            doctest::Approx(fold + 2 * std::log2(q) * a + 2.0 * (q - 1) / q * m * b + (q - 1.0) / q * m * g)
                .epsilon(1e-12));
      const double segments = std::max(1.0, std::ceil(m / machine.shm_segment));
      CHECK(modelled(AllreduceAlgorithm::shm, p, m, machine) ==
            doctest::Approx(2 * segments * machine.barrier + (p - 1.0) / p * m * (2 * b + g)).epsilon(1e-12));
    }
  }
  for (const AllreduceAlgorithm algorithm : modelled_algorithms()) CHECK(modelled(algorithm, 1, 1e6, machine) == 0.0);
  CHECK_FALSE(allreduce_seconds(AllreduceAlgorithm::builtin, 4, 1e6, machine).has_value());
}

TEST_CASE("cost model: an allgather is the ring's and rhd's second half, what sharding adds for stage 3") {
  const Machine machine = flat();
  const double a = machine.intra_node.alpha, b = machine.intra_node.beta;
  for (const int p : {2, 3, 4, 5, 8, 13, 64}) {
    for (const double m : {0.0, 4.0, 4096.0, 3e6, 256e6}) {
      CAPTURE(p);
      CAPTURE(m);
      const auto ring = allgather_seconds(AllreduceAlgorithm::ring, p, m, machine);
      REQUIRE(ring.has_value());
      CHECK(*ring == doctest::Approx((p - 1) * (a + m / p * b)).epsilon(1e-12));
      // Without the sums, the ring's allreduce is two of them.
      Machine free_sums = machine;
      free_sums.gamma = 0.0;
      CHECK(2 * *allgather_seconds(AllreduceAlgorithm::ring, p, m, free_sums) ==
            doctest::Approx(modelled(AllreduceAlgorithm::ring, p, m, free_sums)).epsilon(1e-12));
      const int q = 1 << static_cast<int>(std::floor(std::log2(p)));
      // A folded rank sends its chunk in and receives the whole back.
      const double fold = p == q ? 0.0 : (a + m / p * b) + (a + m * b);
      const auto rhd = allgather_seconds(AllreduceAlgorithm::rhd, p, m, machine);
      REQUIRE(rhd.has_value());
      CHECK(*rhd == doctest::Approx(fold + std::log2(q) * a + (q - 1.0) / q * m * b).epsilon(1e-12));
    }
  }
  CHECK(*allgather_seconds(AllreduceAlgorithm::ring, 1, 1e6, machine) == 0.0);
  for (const AllreduceAlgorithm other :
       {AllreduceAlgorithm::tree, AllreduceAlgorithm::naive, AllreduceAlgorithm::shm, AllreduceAlgorithm::builtin}) {
    CHECK_FALSE(allgather_seconds(other, 4, 1e6, machine).has_value());
  }
}

TEST_CASE(
    "cost model: steps that cross nodes pay the network, shared by what leaves a node, and shm stops at the node") {
  Machine machine = flat();
  machine.ranks_per_node = 8;
  const Link net = machine.network, intra = machine.intra_node;
  const double m = 64e6, g = machine.gamma;
  // The ring of 16 ranks on 2 nodes: one edge leaves each node, and every
  // step waits for it; within one node it never does.
  CHECK(modelled(AllreduceAlgorithm::ring, 16, m, machine) ==
        doctest::Approx(30 * net.seconds(m / 16) + 15 * m / 16 * g).epsilon(1e-12));
  CHECK(modelled(AllreduceAlgorithm::ring, 8, m, machine) ==
        doctest::Approx(14 * intra.seconds(m / 8) + 7 * m / 8 * g).epsilon(1e-12));
  // Halving's first step pairs rank r with r + 8, on the other node: all 8
  // ranks of a node send through its interface at once. The three steps
  // after it stay inside a node.
  CHECK(modelled(AllreduceAlgorithm::rhd, 16, m, machine) ==
        doctest::Approx(2 * (net.alpha + 8 * (m / 2) * net.beta) +
                        2 * (intra.seconds(m / 4) + intra.seconds(m / 8) + intra.seconds(m / 16)) + (15.0 / 16) * m * g)
            .epsilon(1e-12));
  // The binomial tree's last round (distance 8) crosses.
  CHECK(modelled(AllreduceAlgorithm::tree, 16, m, machine) ==
        doctest::Approx(2 * (3 * intra.seconds(m) + net.seconds(m)) + 4 * m * g).epsilon(1e-12));
  // Naive's rank 0 sends the sum to the 8 ranks of the other node at once.
  CHECK(modelled(AllreduceAlgorithm::naive, 16, m, machine) ==
        doctest::Approx(7 * intra.seconds(m) + 8 * net.seconds(m) + 15 * m * g + net.alpha + 8 * m * net.beta)
            .epsilon(1e-12));
  CHECK(allreduce_seconds(AllreduceAlgorithm::shm, 8, m, machine).has_value());
  CHECK_FALSE(allreduce_seconds(AllreduceAlgorithm::shm, 9, m, machine).has_value());
}

TEST_CASE("cost model: hierarchical is the tree inside a node around the ring of leaders, and wins on a slow network") {
  Machine machine = flat();
  machine.ranks_per_node = 4;
  const Link net = machine.network, intra = machine.intra_node;
  const double g = machine.gamma;
  for (const double m : {4096.0, 3e6, 256e6}) {
    CAPTURE(m);
    // 4 nodes of 4: two tree levels in each node, up and down, then the
    // ring over 4 leaders, every message on the network.
    CHECK(
        modelled(AllreduceAlgorithm::hierarchical, 16, m, machine) ==
        doctest::Approx(2 * 2 * intra.seconds(m) + 2 * m * g + 6 * net.seconds(m / 4) + 3 * m / 4 * g).epsilon(1e-12));
    // One node: the tree; a rank per node: the ring.
    CHECK(modelled(AllreduceAlgorithm::hierarchical, 4, m, machine) ==
          doctest::Approx(modelled(AllreduceAlgorithm::tree, 4, m, machine)).epsilon(1e-12));
    Machine alone = machine;
    alone.ranks_per_node = 1;
    CHECK(modelled(AllreduceAlgorithm::hierarchical, 16, m, alone) ==
          doctest::Approx(modelled(AllreduceAlgorithm::ring, 16, m, alone)).epsilon(1e-12));
  }
  // Only the leaders cross the network, 2(N-1) times instead of the flat
  // ring's 2(p-1): where it is 100 times slower than a node's memory, that
  // wins at every size. Where it is only 10 times slower, the tree's whole
  // buffers inside the node (4 m here, against the ring's 15/16 m across)
  // cost more on large messages: the flat ring wins those.
  Machine slow = machine;
  slow.network.beta = 100 * slow.intra_node.beta;
  for (const double m : {4096.0, 256e6}) {
    CHECK(modelled(AllreduceAlgorithm::hierarchical, 16, m, slow) < modelled(AllreduceAlgorithm::ring, 16, m, slow));
  }
  CHECK(modelled(AllreduceAlgorithm::hierarchical, 16, 4096, machine) <
        modelled(AllreduceAlgorithm::ring, 16, 4096, machine));
  CHECK(modelled(AllreduceAlgorithm::ring, 16, 256e6, machine) <
        modelled(AllreduceAlgorithm::hierarchical, 16, 256e6, machine));
  // fastest_allreduces: sorted, what the model cannot price left out, and
  // of equal times the candidate named first.
  const std::vector<AllreduceAlgorithm> candidates{AllreduceAlgorithm::builtin, AllreduceAlgorithm::ring,
                                                   AllreduceAlgorithm::hierarchical, AllreduceAlgorithm::naive};
  const auto priced = fastest_allreduces(candidates, 16, 256e6, slow);
  REQUIRE(priced.size() == 3);
  CHECK(priced[0].first == AllreduceAlgorithm::hierarchical);
  CHECK(priced[0].second == modelled(AllreduceAlgorithm::hierarchical, 16, 256e6, slow));
  for (std::size_t i = 1; i < priced.size(); ++i) CHECK(priced[i - 1].second <= priced[i].second);
  const std::vector<AllreduceAlgorithm> twins{AllreduceAlgorithm::ring, AllreduceAlgorithm::hierarchical};
  Machine alone = machine;
  alone.ranks_per_node = 1;
  CHECK(fastest_allreduces(twins, 16, 1e6, alone)[0].first == AllreduceAlgorithm::ring);
}

TEST_CASE("cost model: few steps win small messages, the ring wins large ones, the server is the bottleneck") {
  Machine machine = flat();
  machine.ranks_per_node = 8;
  for (const int p : {16, 64, 512, 4096}) {
    CAPTURE(p);
    // 4 KiB: latency-bound, log2 p steps beat 2(p-1).
    CHECK(modelled(AllreduceAlgorithm::rhd, p, 4096, machine) < modelled(AllreduceAlgorithm::ring, p, 4096, machine));
    CHECK(modelled(AllreduceAlgorithm::tree, p, 4096, machine) < modelled(AllreduceAlgorithm::ring, p, 4096, machine));
    // 1 GiB: bandwidth-bound; the ring sends 2(p-1)/p of it, the tree
    // 2 log2 p times all of it, rank 0 of naive 2(p-1) times.
    const double large = 1 << 30;
    CHECK(modelled(AllreduceAlgorithm::ring, p, large, machine) <
          modelled(AllreduceAlgorithm::tree, p, large, machine));
    CHECK(modelled(AllreduceAlgorithm::tree, p, large, machine) <
          modelled(AllreduceAlgorithm::naive, p, large, machine));
    // One server for p - 1 workers carries (p - 1) x the gradients each way.
    CHECK(parameter_server_seconds(p - 1, 1, large, machine) >
          4 * modelled(AllreduceAlgorithm::ring, p, large, machine));
  }
  const auto server_over_ring = [&](int p) {
    return parameter_server_seconds(p - 1, 1, 1 << 30, machine) /
           modelled(AllreduceAlgorithm::ring, p, 1 << 30, machine);
  };
  CHECK(server_over_ring(4096) > 100 * server_over_ring(16));
  // On one node halving sends the ring's bytes in fewer steps, so it never
  // loses; across nodes its all-at-once exchanges share the interface, and
  // the ring wins large messages.
  for (const double bytes : {1.0, 4096.0, 1e6, 1e9}) {
    CHECK(modelled(AllreduceAlgorithm::rhd, 64, bytes, flat()) <=
          modelled(AllreduceAlgorithm::ring, 64, bytes, flat()));
  }
  CHECK(modelled(AllreduceAlgorithm::ring, 64, 256e6, machine) < modelled(AllreduceAlgorithm::rhd, 64, 256e6, machine));
  // The ring's bandwidth term tends to 2 m beta as p grows, so a large
  // message costs about as much on 4096 ranks as on 64: only the 2(p-1)
  // latencies grow.
  const double huge = 1e9;
  const Link link = flat().intra_node;
  CHECK(modelled(AllreduceAlgorithm::ring, 4096, huge, flat()) <
        1.05 * modelled(AllreduceAlgorithm::ring, 64, huge, flat()));
  CHECK(modelled(AllreduceAlgorithm::ring, 4096, huge, flat()) ==
        doctest::Approx(2 * huge * link.beta + huge * flat().gamma + 2 * 4095 * link.alpha).epsilon(1e-3));
  // More servers share the load, unless they share a node's interface.
  CHECK(parameter_server_seconds(8, 4, 1e8, flat()) < parameter_server_seconds(8, 1, 1e8, flat()) / 3);
  CHECK(parameter_server_seconds(8, 4, 1e8, machine) ==
        doctest::Approx(parameter_server_seconds(8, 1, 1e8, machine)).epsilon(0.01));
}

TEST_CASE("cost model: data-parallel efficiency and the pipeline bubble") {
  CHECK(data_parallel_efficiency(0.1, 0.0) == 1.0);
  CHECK(data_parallel_efficiency(0.1, 0.1) == doctest::Approx(0.5));
  CHECK(data_parallel_efficiency(0.1, 0.1, 0.75) == doctest::Approx(0.1 / 0.125));
  CHECK(data_parallel_efficiency(0.1, 0.1, 1.0) == 1.0);
  CHECK(throws_error_mentioning([] { data_parallel_efficiency(0.0, 1.0); }, {"compute > 0"}));
  CHECK(throws_error_mentioning([] { data_parallel_efficiency(1.0, 1.0, 1.5); }, {"overlap in [0, 1]", "1.5"}));
  CHECK(pipeline_bubble(1, 1) == 0.0);
  CHECK(pipeline_bubble(4, 1) == doctest::Approx(0.75));
  CHECK(pipeline_bubble(4, 8) == doctest::Approx(3.0 / 11));
  CHECK(pipeline_speedup(4, 8) == doctest::Approx(32.0 / 11));
  CHECK(throws_error_mentioning([] { pipeline_bubble(0, 4); }, {"stages >= 1"}));
}

TEST_CASE("cost model: fit_link recovers alpha and beta, and refuses what cannot be fitted") {
  const std::vector<double> bytes{8, 64, 4096, 65536, 1 << 20, 16 << 20};
  std::vector<double> seconds;
  for (const double m : bytes) seconds.push_back(3e-6 + m * 2.5e-10);
  const Link link = fit_link(bytes, seconds);
  CHECK(link.alpha == doctest::Approx(3e-6).epsilon(1e-9));
  CHECK(link.beta == doctest::Approx(2.5e-10).epsilon(1e-9));
  CHECK(throws_error_mentioning(
      [] {
        fit_link(std::vector<double>{64, 64}, std::vector<double>{1e-6, 2e-6});
      },
      {"must not all be equal"}));
  CHECK(throws_error_mentioning([] { fit_link(std::vector<double>{64}, std::vector<double>{1e-6}); }, {"at least 2"}));
  CHECK(throws_error_mentioning(
      [] {
        fit_link(std::vector<double>{8, 64}, std::vector<double>{1e-6, 0.0});
      },
      {"not positive"}));
}

TEST_CASE("cost model: times and bandwidths are read with their units") {
  CHECK(parse_seconds("2us") == doctest::Approx(2e-6));
  CHECK(parse_seconds("1.5 ms") == doctest::Approx(1.5e-3));
  CHECK(parse_seconds("3e-6") == doctest::Approx(3e-6));
  CHECK(parse_seconds("40ns") == doctest::Approx(4e-8));
  CHECK(parse_bandwidth("100Gb/s") == doctest::Approx(12.5e9));
  CHECK(parse_bandwidth("12.5GB/s") == doctest::Approx(12.5e9));
  CHECK(parse_bandwidth("25 GiB/s") == doctest::Approx(25.0 * (1 << 30)));
  CHECK(parse_bandwidth("400Mb/s") == doctest::Approx(50e6));
  CHECK(parse_bandwidth("1e10") == doctest::Approx(1e10));
  for (const char* bad : {"", "fast", "-2us", "0"}) {
    CHECK(throws_error_mentioning([&] { parse_seconds(bad); }, {"a time", "positive number"}));
  }
  CHECK(throws_error_mentioning([] { parse_seconds("2 weeks"); }, {"unknown unit 'weeks'"}));
  CHECK(throws_error_mentioning([] { parse_bandwidth("100 Gb"); }, {"Gb/s"}));
  CHECK(throws_error_mentioning([] { parse_bandwidth("100 Xb/s"); }, {"unknown prefix 'X'"}));
  CHECK(throws_error_mentioning([] { parse_bandwidth("100 G/s"); }, {"b/s (bits) or B/s (bytes)"}));
}
