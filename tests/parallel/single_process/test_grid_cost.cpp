// The 3-D grid's cost (parallel/planning/grid_cost.hpp): each axis alone is
// the formula of its own strategy (data parallelism's allreduce, the
// tensor pairs' two allreduces per micro-batch, the pipeline's bubble),
// memory falls as 1/(T P), and the grid it picks is the fastest that fits.
#include <doctest/doctest.h>

#include <vector>

#include <ddl/parallel/planning/grid_cost.hpp>

#include "support/test_data.hpp"

using namespace ddl::parallel;
using namespace ddl::parallel::cost;
using ddl::test::throws_error_mentioning;

namespace {

// Nodes of 8 ranks: 2 us and 20 GB/s inside, 10 us and 12.5 GB/s (100 Gb/s) between.
Machine cluster() {
  Machine machine;
  machine.intra_node = {2e-6, 1.0 / 20e9};
  machine.network = {10e-6, 1.0 / 12.5e9};
  machine.ranks_per_node = 8;
  machine.gamma = 0.1e-9;
  return machine;
}

// wide_mlp's shape: 104 M parameters in 4 pairs of width 4096, 10 ms a sample.
GridModel wide() {
  return {.parameters = 104e6, .sample_seconds = 10e-3, .width = 4096, .pairs = 4, .activation_bytes = 200e3};
}

double ring(int ranks, double bytes, const Machine& machine) {
  return *allreduce_seconds(AllreduceAlgorithm::ring, ranks, bytes, machine);
}

}  // namespace

TEST_CASE("grid cost: each axis alone costs what its strategy's formula says") {
  const Machine machine = cluster();
  const GridModel model = wide();
  // Data parallelism over a node: each rank's share of the batch, then one allreduce of every gradient.
  const GridCost data = grid_cost(model, {8, 1, 1, 1}, 256, machine);
  CHECK(data.compute == doctest::Approx(32 * 10e-3));
  CHECK(data.data == doctest::Approx(ring(8, 104e6 * 4, machine)));
  CHECK(data.tensor == 0.0);
  CHECK(data.pipeline == 0.0);
  CHECK(data.bubble == 0.0);
  CHECK(grid_cost(model, {8, 1, 1, 1}, 256, machine, AllreduceAlgorithm::ring, 0.75).data ==
        doctest::Approx(0.25 * data.data));
  // Tensor parallelism: per pair, one allreduce of the activation forward and one backward.
  const GridCost tensor = grid_cost(model, {1, 8, 1, 1}, 256, machine);
  CHECK(tensor.compute == doctest::Approx(256 * 10e-3 / 8));
  CHECK(tensor.tensor == doctest::Approx(2 * 4 * ring(8, 256 * 4096 * 4.0, machine)));
  CHECK(tensor.data == 0.0);
  // A pipeline on a free network: the bubble's share is (P - 1) / (M + P - 1).
  Machine free = machine;
  free.intra_node = free.network = {0.0, 0.0};
  for (const int m : {1, 4, 16}) {
    const GridCost pipeline = grid_cost(model, {1, 1, 8, m}, 256, free);
    CHECK(pipeline.bubble / pipeline.step() == doctest::Approx(pipeline_bubble(8, m)));
  }
  // With messages, each micro-batch sends its activation on and its gradient back, within the node.
  const GridCost pipeline = grid_cost(model, {1, 1, 8, 8}, 256, machine);
  CHECK(pipeline.pipeline == doctest::Approx(8 * 2 * machine.intra_node.seconds(32 * 4096 * 4.0)));
}

TEST_CASE("grid cost: a rank holds 1/(T P) of the state, and the data groups share the network") {
  const Machine machine = cluster();
  const GridModel model = wide();
  const double whole = 104e6 * (4 + 4 + 8);
  CHECK(grid_cost(model, {8, 1, 1, 1}, 256, machine).state_bytes == doctest::Approx(whole));
  CHECK(grid_cost(model, {2, 2, 2, 4}, 256, machine).state_bytes == doctest::Approx(whole / 4));
  CHECK(grid_cost(model, {1, 4, 4, 4}, 256, machine).state_bytes == doctest::Approx(whole / 16));
  // 1F1B: stage 0 keeps min(M, P) micro-batches of its 1/P of the layers, 1/T of them.
  CHECK(grid_cost(model, {1, 2, 4, 16}, 256, machine).activation_bytes == doctest::Approx(200e3 * 16 * 4 / 4 / 2));
  // 64 ranks as 8 replicas of a node-wide tensor group: each node's 8 ranks allreduce
  // with 8 other nodes at once, sharing its interface.
  const GridCost spread = grid_cost(model, {8, 8, 1, 1}, 256, machine);
  Machine shared = machine;
  shared.ranks_per_node = 1;
  shared.network.beta *= 8;
  CHECK(spread.data == doctest::Approx(ring(8, 104e6 * 4 / 8, shared)));
}

TEST_CASE("grid cost: every grid of the ranks, and the fastest that fits the memory") {
  const GridModel small{.parameters = 1e6, .sample_seconds = 1e-3, .width = 8, .pairs = 2};
  // 4 ranks, batch 8, M in {1, 2, 4}: dp 4; dp 2 x pp 2 (3 M); pp 4 (3 M); dp 2 x tp 2; tp 2 x pp 2 (3 M); tp 4.
  CHECK(grids_of(4, small, 8, {.micro_batches = {1, 2, 4}}).size() == 12);
  CHECK(grids_of(4, small, 8, {.micro_batches = {1, 2, 4}, .max_tensor = 2}).size() == 11);
  const Machine machine = cluster();
  // Two pairs of width 256 (2 x 2 x 256^2 parameters): data parallelism sends 4 bytes per parameter,
  // tensor parallelism 2 pairs x 2 allreduces x batch x 256 floats: the same bytes at batch 256. Above
  // it data parallelism wins, below it tensor parallelism (on one node, where latency is small).
  const GridModel pairs{.parameters = 262144, .sample_seconds = 1e-3, .width = 256, .pairs = 2};
  const auto large_batch = best_grid(8, pairs, 2048, machine, {.micro_batches = {1, 2, 4, 8}});
  REQUIRE(large_batch.has_value());
  CHECK(large_batch->str() == "8 x 1 x 1 (M 1)");
  const auto small_batch = best_grid(8, pairs, 16, machine, {.micro_batches = {1, 2, 4, 8}});
  REQUIRE(small_batch.has_value());
  CHECK(small_batch->tensor > 1);
  // wide_mlp on 64 ranks with 1 GB each: data parallelism's 1.66 GB per rank does not fit.
  const GridModel model = wide();
  const GridChoices within{.max_tensor = 8, .memory_bytes = 1e9};
  const auto fits = best_grid(64, model, 1024, machine, within);
  REQUIRE(fits.has_value());
  CHECK(fits->tensor * fits->stages >= 2);
  CHECK(fits->tensor <= 8);
  CHECK(grid_cost(model, *fits, 1024, machine).memory() <= 1e9);
  for (const Grid& grid : grids_of(64, model, 1024, within)) {
    const GridCost cost = grid_cost(model, grid, 1024, machine);
    if (cost.memory() <= 1e9) CHECK(cost.step() >= grid_cost(model, *fits, 1024, machine).step());
  }
  CHECK_FALSE(best_grid(64, model, 1024, machine, {.micro_batches = {1}, .memory_bytes = 1e6}).has_value());
}

TEST_CASE("grid cost: grids the model cannot run are refused, naming why") {
  const Machine machine = cluster();
  const GridModel model = wide();
  CHECK(throws_error_mentioning(
      [&] {
        grid_cost(model, {1, 8192, 1, 1}, 256, machine);
      },
      {"splits 4096 features 8192 ways"}));
  CHECK(throws_error_mentioning(
      [&] {
        grid_cost(model, {1, 2, 8, 8}, 256, machine);
      },
      {"cuts 4 pairs into 8 stages", "at most one per pair"}));
  CHECK(throws_error_mentioning(
      [&] {
        grid_cost(model, {4, 1, 2, 128}, 256, machine);
      },
      {"cuts a pipeline's 64 samples into 128 micro-batches"}));
  CHECK(throws_error_mentioning(
      [&] {
        grid_cost(model, {2, 1, 1, 1}, 256, machine, AllreduceAlgorithm::shm);
      },
      {"shm allreduce is not modelled"}));
}
