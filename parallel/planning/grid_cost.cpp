// The 3-D grid's step and memory (see grid_cost.hpp).
#include <ddl/parallel/planning/grid_cost.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include <ddl/core/check.hpp>

namespace ddl::parallel::cost {
namespace {

constexpr double kFloat = 4.0;

// The machine as a group of ranks `stride` apart sees it, while every
// other group of the node's ranks sends at the same time: a group has
// ranks_per_node / stride ranks on each node (at least 1), and the
// messages leaving a node share its interface with min(ranks_per_node,
// stride) other groups' (the data groups' allreduces all run at once).
Machine spaced(const Machine& machine, int stride) {
  Machine group = machine;
  group.ranks_per_node = std::max(1, machine.ranks_per_node / stride);
  group.network.beta *= std::min(machine.ranks_per_node, stride);
  return group;
}

// One message of `bytes` across a stage boundary, T ranks apart: inside a
// node where a whole pipeline fits, else over the network, whose interface
// the boundary's min(T, ranks_per_node) senders on a node share.
double boundary_seconds(const Grid& grid, double bytes, const Machine& machine) {
  if (grid.tensor * grid.stages <= machine.ranks_per_node) return machine.intra_node.seconds(bytes);
  return machine.network.alpha + bytes * machine.network.beta * std::min(grid.tensor, machine.ranks_per_node);
}

double allreduce(AllreduceAlgorithm algorithm, int ranks, double bytes, const Machine& machine) {
  if (ranks == 1) return 0.0;
  const auto seconds = allreduce_seconds(algorithm, ranks, bytes, machine);
  DDL_CHECK(seconds && algorithm != AllreduceAlgorithm::shm,
            "grid cost: the {} allreduce is not modelled across nodes; take ring, rhd, tree or naive",
            algorithm_name(algorithm));
  return *seconds;
}

// The most stages a grid may cut the model into: one Dense layer each, or
// with tensor groups one pair each (a stage may not begin inside a pair).
int most_stages(const GridModel& model, int tensor) { return tensor > 1 ? model.pairs : 2 * model.pairs; }

}  // namespace

std::string Grid::str() const { return fmt::format("{} x {} x {} (M {})", data, tensor, stages, micro_batches); }

GridCost grid_cost(const GridModel& model, const Grid& grid, std::int64_t batch, const Machine& machine,
                   AllreduceAlgorithm algorithm, double overlap) {
  DDL_CHECK(grid.data >= 1 && grid.tensor >= 1 && grid.stages >= 1 && grid.micro_batches >= 1,
            "grid cost: {} has a count below 1", grid.str());
  DDL_CHECK(model.pairs >= 1 && model.width >= 1.0 && model.parameters > 0.0 && model.sample_seconds >= 0.0,
            "grid cost: a model of {} pairs, width {}, {} parameters and {} s per sample", model.pairs, model.width,
            model.parameters, model.sample_seconds);
  DDL_CHECK(grid.tensor <= model.width, "grid cost: {} splits {} features {} ways", grid.str(), model.width,
            grid.tensor);
  DDL_CHECK(grid.stages <= most_stages(model, grid.tensor), "grid cost: {} cuts {} pairs into {} stages{}", grid.str(),
            model.pairs, grid.stages, grid.tensor > 1 ? " (with tensor groups, at most one per pair)" : "");
  const double pipeline_batch = static_cast<double>(batch) / grid.data;
  DDL_CHECK(grid.micro_batches <= pipeline_batch, "grid cost: {} cuts a pipeline's {} samples into {} micro-batches",
            grid.str(), pipeline_batch, grid.micro_batches);
  const double micro = pipeline_batch / grid.micro_batches;
  const double split = static_cast<double>(grid.tensor) * grid.stages;
  const double activation = micro * model.width * kFloat;

  // One micro-batch's time on the busiest stage: its share of the compute,
  // its pairs' allreduces, its boundary's two messages.
  const double compute = model.sample_seconds * micro / split;
  const int stage_pairs = (model.pairs + grid.stages - 1) / grid.stages;
  const double tensor = 2.0 * stage_pairs * allreduce(algorithm, grid.tensor, activation, machine);
  const double boundary = grid.stages > 1 ? 2.0 * boundary_seconds(grid, activation, machine) : 0.0;
  const double slot = compute + tensor + boundary;

  GridCost cost;
  cost.compute = grid.micro_batches * compute;
  cost.tensor = grid.micro_batches * tensor;
  cost.pipeline = grid.micro_batches * boundary;
  cost.bubble = (grid.stages - 1) * slot;
  const double gradients = model.parameters * kFloat / split;
  cost.data = (1.0 - overlap) * allreduce(algorithm, grid.data, gradients, spaced(machine, grid.tensor * grid.stages));
  cost.state_bytes = model.parameters / split * (2.0 * kFloat + model.optimizer_bytes);
  cost.activation_bytes =
      model.activation_bytes * micro * std::min(grid.micro_batches, grid.stages) / grid.stages / grid.tensor;
  return cost;
}

std::vector<Grid> grids_of(int ranks, const GridModel& model, std::int64_t batch, const GridChoices& choices) {
  std::vector<Grid> grids;
  for (int tensor = 1; tensor <= ranks; ++tensor) {
    if (ranks % tensor != 0 || tensor > model.width) continue;
    if (choices.max_tensor > 0 && tensor > choices.max_tensor) continue;
    for (int stages = 1; stages <= ranks / tensor; ++stages) {
      if ((ranks / tensor) % stages != 0 || stages > most_stages(model, tensor)) continue;
      const int data = ranks / (tensor * stages);
      if (data > batch) continue;
      if (stages == 1) {
        grids.push_back({data, tensor, 1, 1});
        continue;
      }
      for (const int m : choices.micro_batches) {
        if (m >= 1 && static_cast<double>(m) <= static_cast<double>(batch) / data) {
          grids.push_back({data, tensor, stages, m});
        }
      }
    }
  }
  return grids;
}

std::optional<Grid> best_grid(int ranks, const GridModel& model, std::int64_t batch, const Machine& machine,
                              const GridChoices& choices, AllreduceAlgorithm algorithm, double overlap) {
  std::optional<Grid> best;
  double fastest = INFINITY;
  for (const Grid& grid : grids_of(ranks, model, batch, choices)) {
    const GridCost cost = grid_cost(model, grid, batch, machine, algorithm, overlap);
    if (choices.memory_bytes > 0.0 && cost.memory() > choices.memory_bytes) continue;
    if (cost.step() < fastest) {
      fastest = cost.step();
      best = grid;
    }
  }
  return best;
}

}  // namespace ddl::parallel::cost
