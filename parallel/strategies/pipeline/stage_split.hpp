// How a pipeline cuts a Sequential of L layers into p contiguous, non-empty
// stages, one per rank: split points the user gives, or stages balanced by a
// cost per layer (one per layer, parameter bytes, or the measured forward +
// backward time of each layer built alone).
//
//   const auto layers = models::model_layers("mnist_cnn");
//   const auto costs = parallel::layer_costs(layers, StageBalance::Parameters, {1, 28, 28}, 128);
//   const auto stages = parallel::balanced_split(costs, 2);  // {0-4, 5-10}
//   fmt::print("{}", parallel::format_stages(stages, costs, StageBalance::Parameters));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/core/shape.hpp>
#include <ddl/layers/layer_list.hpp>
#include <ddl/parallel/planning/cost_model.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>

namespace ddl::parallel {

// The layers first..last (inclusive) of the whole model, which one stage runs.
struct StageRange {
  std::size_t first = 0;
  std::size_t last = 0;

  bool operator==(const StageRange&) const = default;
  std::size_t size() const { return last - first + 1; }
};

// What balanced_split evens out: the number of layers, their parameter
// bytes (memory), or their measured forward + backward time (speed).
enum class StageBalance { Layers, Parameters, Time };

// "layers", "parameters" or "time"; anything else is a ddl::Error listing them.
StageBalance parse_stage_balance(std::string_view name);
std::string_view stage_balance_name(StageBalance balance);
std::vector<StageBalance> all_stage_balances();

// Parses "4,7": the first layer of every stage but the first, so over 11
// layers and 3 stages it gives {0-3, 4-6, 7-10}; one stage takes "". Throws
// ddl::Error naming what is wrong: stages < 1, more stages than layers, a
// count of points other than stages - 1, a point that is not a layer index
// or is 0 or past the last layer, points that are not strictly increasing
// (naming the stage they would leave empty).
std::vector<StageRange> parse_split(std::string_view text, std::size_t layers, int stages);

// The contiguous, non-empty stages over layer_costs.size() layers whose
// largest total cost is the smallest possible (the linear partition
// problem), found by dynamic programming over prefix sums in O(p L²).
//
// Many splits can reach that smallest maximum: under Parameters balance most
// layers (activations, pooling, dropout) cost nothing and can sit on either
// side of a boundary. Among them it picks
//   1. the most even layer counts (the smallest sum of squared stage
//      sizes), so free layers spread out rather than pile onto one stage;
//   2. then the shortest earlier stages (the lexicographically smallest
//      split points), because under 1F1B an earlier stage holds the
//      activations of more micro-batches.
// Costs that are whole numbers (layer counts, bytes) sum exactly, so their
// ties are exact; measured times rarely tie at all.
//
// Throws ddl::Error for stages < 1, more stages than layers, or a negative or
// non-finite cost (naming the layer).
std::vector<StageRange> balanced_split(const std::vector<double>& layer_costs, int stages);
// As above, with stages that begin only where may_begin[i] (one per layer;
// may_begin[0] is not read): the layers between two places to cut stay on
// one stage (a tensor-parallel pair, whose activation between is sharded).
// Throws ddl::Error, naming the layers that stay together, when there are
// fewer places to cut than stages - 1.
std::vector<StageRange> balanced_split(const std::vector<double>& layer_costs, int stages,
                                       const std::vector<bool>& may_begin);

// As balanced_split, for a schedule of `chunks` chunks per rank laid out by
// `layout` (ranks x chunks stages, pipeline_schedule.hpp), where what must
// be even is each rank's total, its chunks' costs together: from
// balanced_split's stages, one boundary moves by one layer at a time, the
// move that lowers the largest rank total the most (or, at an equal one,
// the largest stage, then the sum of the totals' squares), until no move
// does (a local search: it may stop short of the best split). One chunk
// per rank: balanced_split's stages.
std::vector<StageRange> balanced_chunk_split(const std::vector<double>& layer_costs, int ranks, int chunks,
                                             ChunkLayout layout, const std::vector<bool>& may_begin);
// Each rank's total cost under that layout: its chunks' stages together.
std::vector<double> rank_totals(const std::vector<double>& layer_costs, const std::vector<StageRange>& stages,
                                int ranks, ChunkLayout layout);

// One cost per layer of `layers` for balanced_split:
//   Layers:     1 each;
//   Parameters: the bytes of each layer's parameters;
//   Time:       the median seconds of a forward and a backward of each layer
//               alone on `device`, after a warm-up, on a random input of
//               [batch, sample] that requires grad (so parameter-free layers
//               run a backward too). The model's input sample shape is
//               `sample_shape` (e.g. {1, 28, 28}); each later layer's is the
//               output of the one before. One layer is built at a time, from
//               a scratch generator, and freed before the next, so a model
//               too large for `device` as a whole can still be measured.
//               The default generator (which dropout draws from) is left as
//               it was found.
// sample_shape, batch and device matter only for Time. A layer that refuses
// its input throws ddl::Error naming the layer and the input's shape.
std::vector<double> layer_costs(const layers::LayerList& layers, StageBalance balance, const Shape& sample_shape,
                                std::int64_t batch, const Device& device = cpu());

// One layer's measured seconds in a pipeline schedule's terms, and what a
// stage that ends with it sends on.
struct LayerTime {
  double forward = 0.0;
  double backward = 0.0;          // for the input (B)
  double weight = 0.0;            // for its Dense and convolution weights (W; 0 without any)
  std::int64_t output_bytes = 0;  // its output at the measured batch
  double total() const { return forward + backward + weight; }
};

// Each layer of `layers` timed as layer_costs' Time does (the medians of
// runs alone on `device` at [batch, sample]), its backward in its two
// halves: B, the input's gradient, and W, the weights' gradients a pipeline
// defers (core/deferred_gradients.hpp). Layer_costs' Time is their total.
std::vector<LayerTime> layer_times(const layers::LayerList& layers, const Shape& sample_shape, std::int64_t batch,
                                   const Device& device = cpu());

// The time of one step of `schedule` in back-to-back steps
// (steady_step_time) on `stages`, one per rank, at `micro_batches`
// micro-batches of the size the times were measured at: each stage's F, B
// and W the sums of its layers', each boundary's messages (activations on,
// gradients back) the link's time for the output of the layer before it.
double simulated_step_seconds(const std::vector<LayerTime>& times, const std::vector<StageRange>& stages,
                              PipelineSchedule schedule, int micro_batches, WeightGradients weights,
                              const cost::Link& link);

// Stages for `schedule`, one per rank, balanced by its simulated step:
// from balanced_split of the layers' total times, a boundary moves one
// layer at a time, the move that shortens simulated_step_seconds the most,
// until none does (a local search). What the total alone misses: a schedule that places the W's
// (zb-h1, zb-h2) fills its bubbles with them, so B and F set its pace more
// than W; a cut where the activation is small (after pooling) sends less.
// Under weight gradients at the batch's end a convolution's W runs inside
// its B; the simulation places it with the Dense layers' W (the same
// total). ddl::Error for a schedule of several chunks per rank
// (balanced_chunk_split).
std::vector<StageRange> schedule_balanced_split(const std::vector<LayerTime>& times, int stages,
                                                PipelineSchedule schedule, int micro_batches,
                                                WeightGradients weights, const cost::Link& link,
                                                const std::vector<bool>& may_begin);

// "0-3,8-11": the ranges as a rank's chunks list them ("5" for one layer).
std::string format_ranges(const std::vector<StageRange>& ranges);

// A table for ddl-train to print: each stage, its layers "a-b", its cost in
// the balance's unit (layers, MiB, ms) and its share of the total. The
// stages must cover the layers of layer_costs in order.
std::string format_stages(const std::vector<StageRange>& stages, const std::vector<double>& layer_costs,
                          StageBalance balance);

// The table for a split balanced by the schedule's step: each stage, its
// layers, its forward, B and W milliseconds per micro-batch, the KiB its
// last layer sends on, and its share of the total time.
std::string format_timed_stages(const std::vector<StageRange>& stages, const std::vector<LayerTime>& times);

}  // namespace ddl::parallel
