// What a training step costs on a 3-D grid of D data-parallel replicas x T
// tensor ranks x P pipeline stages (strategies/process_grid.hpp), and the
// grid to pick for a model and a machine: the cost model
// (cost_model.hpp) applied to the three kinds of traffic, so the trade-off
// Megatron-LM's authors tune by hand (Narayanan et al. 2021, "Efficient
// large-scale language model training on GPU clusters") can be read off a
// table. The model is a stack of Megatron pairs (two Dense layers each,
// column then row), as ddl's tensor plan splits wide_mlp:
//
//   compute    the global batch's one-process time, spread over D T P ranks
//              and stretched by the pipeline's bubble: M + P - 1 slots of
//              one micro-batch's stage time for M micro-batches;
//   tensor     per micro-batch and pair, two allreduces of the pair's
//              activation (forward: the row layer's partial sums;
//              backward: the column layer's input gradient) over T ranks
//              side by side (the group is innermost: one node where T fits);
//   pipeline   per micro-batch, the activation forward and its gradient
//              back across each stage boundary;
//   data       one allreduce of a rank's gradients (its 1/(T P) of the
//              parameters) over D ranks T P apart, (1 - overlap) of it not
//              hidden by backward.
//
// Memory per rank: the parameters, gradients and optimizer state of its
// 1/(T P) of the model (4 + 4 + K bytes per parameter), and the activations
// 1F1B keeps (stage 0 holds min(M, P) micro-batches' of its 1/P of the
// layers), 1/T of them each rank's. A simplification: ddl's tensor groups
// also hold the replicated activations whole, and the compute splits
// perfectly. Single-process: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ddl/parallel/planning/cost_model.hpp>

namespace ddl::parallel::cost {

struct GridModel {
  double parameters = 0.0;        // float32 values
  double sample_seconds = 0.0;    // one sample's forward and backward in one process
  double width = 0.0;             // floats per sample a pair's allreduce and a stage boundary carry
  int pairs = 1;                  // Megatron pairs (tensor parallelism splits T <= width ways)
  double activation_bytes = 0.0;  // per sample, kept for backward by the whole model (0: not counted)
  int optimizer_bytes = 8;        // K: Adam's and Adadelta's two float32 values
};

struct Grid {
  int data = 1, tensor = 1, stages = 1, micro_batches = 1;
  int ranks() const { return data * tensor * stages; }
  // "2 x 4 x 8 (M 32)": dp x tp x pp.
  std::string str() const;
};

// One step's seconds by kind (what is not overlapped adds up), and the
// bytes a rank holds.
struct GridCost {
  double compute = 0.0;   // the busy slots of the pipeline: M micro-batches' compute
  double bubble = 0.0;    // its P - 1 idle slots, of the full stage time
  double tensor = 0.0;    // the tensor groups' allreduces in the M busy slots
  double pipeline = 0.0;  // the boundary messages in the M busy slots
  double data = 0.0;      // the exposed gradient allreduce
  double state_bytes = 0.0;
  double activation_bytes = 0.0;
  double step() const { return compute + bubble + tensor + pipeline + data; }
  double memory() const { return state_bytes + activation_bytes; }
};

// The cost of `grid` for `batch` samples per step (the global batch: each
// of the D pipelines takes batch / D, cut into M micro-batches) with the
// `algorithm`'s allreduces (ring, rhd, tree or naive; ddl::Error for the
// rest). ddl::Error for a grid that cannot run the model: T above the
// width, P above 2 pairs (one Dense layer per stage), M above batch / D.
GridCost grid_cost(const GridModel& model, const Grid& grid, std::int64_t batch, const Machine& machine,
                   AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring, double overlap = 0.0);

// What a search over grids may choose from.
struct GridChoices {
  std::vector<int> micro_batches{1, 2, 4, 8, 16, 32};  // for each pipelined grid (one stage takes M = 1)
  int max_tensor = 0;                                  // the largest tensor group (Megatron keeps it in a node); 0: any
  double memory_bytes = 0;                             // per rank; 0: any
};

// Every grid of `ranks` ranks that can run the model and `choices` allow
// (all but the memory), each pipelined one with each micro-batch count
// that fits the batch.
std::vector<Grid> grids_of(int ranks, const GridModel& model, std::int64_t batch, const GridChoices& choices);

// Of those, the grid with the shortest step whose memory per rank fits, or
// none when none fits.
std::optional<Grid> best_grid(int ranks, const GridModel& model, std::int64_t batch, const Machine& machine,
                              const GridChoices& choices, AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring,
                              double overlap = 0.0);

}  // namespace ddl::parallel::cost
