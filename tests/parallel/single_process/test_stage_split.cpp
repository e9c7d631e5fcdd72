// How a pipeline splits a model into stages (parallel/strategies/pipeline/stage_split.cpp): split
// points are parsed and checked; balanced splits are optimal and break ties
// as the header promises, against a brute force over every split; layer
// costs come per layer for each balance, on a bundled model too.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/parallel/strategies/pipeline/stage_split.hpp>

#include "support/test_data.hpp"

namespace ddl::test {
namespace {

using parallel::balanced_split;
using parallel::layer_costs;
using parallel::parse_split;
using parallel::StageBalance;
using parallel::StageRange;
using Stages = std::vector<StageRange>;

// mnist_cnn's layers: Conv2d, ReLU, Conv2d, ReLU, MaxPool2d, Dropout, Flatten,
// Dense(9216, 128), ReLU, Dropout, Dense(128, 10).
constexpr std::size_t kMnistDense = 7;
const Shape kMnistSample{1, 28, 28};

double stage_cost(const std::vector<double>& costs, const StageRange& stage) {
  double cost = 0.0;
  for (std::size_t i = stage.first; i <= stage.last; ++i) cost += costs[i];
  return cost;
}

double largest_stage_cost(const std::vector<double>& costs, const Stages& stages) {
  double largest = 0.0;
  for (const StageRange& stage : stages) largest = std::max(largest, stage_cost(costs, stage));
  return largest;
}

std::size_t squared_sizes(const Stages& stages) {
  std::size_t squares = 0;
  for (const StageRange& stage : stages) squares += stage.size() * stage.size();
  return squares;
}

// Every split of the layers into `stages`, in lexicographic order of the
// split points.
void for_each_split(std::size_t layers, int stages, const std::function<void(const Stages&)>& visit) {
  Stages split;
  std::function<void(std::size_t, int)> extend = [&](std::size_t first, int left) {
    if (left == 1) {
      split.push_back({first, layers - 1});
      visit(split);
      split.pop_back();
      return;
    }
    // Leave at least one layer to each of the other left - 1 stages.
    for (std::size_t next = first + 1; next + static_cast<std::size_t>(left - 1) <= layers; ++next) {
      split.push_back({first, next - 1});
      extend(next, left - 1);
      split.pop_back();
    }
  };
  extend(0, stages);
}

// The header's rule by exhaustion: the smallest largest cost, then the
// smallest sum of squared stage sizes, then the first in lexicographic order.
Stages brute_force_split(const std::vector<double>& costs, int stages) {
  Stages best;
  double best_largest = std::numeric_limits<double>::infinity();
  std::size_t best_squares = 0;
  for_each_split(costs.size(), stages, [&](const Stages& split) {
    const double largest = largest_stage_cost(costs, split);
    const std::size_t squares = squared_sizes(split);
    if (largest < best_largest || (largest == best_largest && squares < best_squares)) {
      best = split;
      best_largest = largest;
      best_squares = squares;
    }
  });
  return best;
}

// Contiguous, non-empty, in order, covering every layer.
void check_covers(const Stages& stages, std::size_t layers, int stage_count) {
  REQUIRE(stages.size() == static_cast<std::size_t>(stage_count));
  std::size_t next = 0;
  for (const StageRange& stage : stages) {
    CHECK(stage.first == next);
    CHECK(stage.first <= stage.last);
    next = stage.last + 1;
  }
  CHECK(next == layers);
}

layers::LayerList small_mlp() {
  layers::LayerList list;
  list.emplace_init<layers::Dense>(20, 30, true).emplace<layers::ReLU>().emplace_init<layers::Dense>(30, 5, true);
  return list;
}

TEST_CASE("stage_split: a stage's size counts both ends") {
  CHECK(StageRange{3, 3}.size() == 1);
  CHECK(StageRange{4, 6}.size() == 3);
}

TEST_CASE("stage_split: balance names round-trip and unknown ones list the known") {
  for (const StageBalance balance : {StageBalance::Layers, StageBalance::Parameters, StageBalance::Time}) {
    CHECK(parallel::parse_stage_balance(parallel::stage_balance_name(balance)) == balance);
  }
  CHECK(parallel::parse_stage_balance("parameters") == StageBalance::Parameters);
  CHECK(throws_error_mentioning([] { parallel::parse_stage_balance("memory"); },
                                {"'memory'", "layers, parameters, time"}));
}

TEST_CASE("stage_split: split points name the first layer of every stage but the first") {
  CHECK(parse_split("4,7", 11, 3) == Stages{{0, 3}, {4, 6}, {7, 10}});
  CHECK(parse_split(" 4 , 7 ", 11, 3) == Stages{{0, 3}, {4, 6}, {7, 10}});
  CHECK(parse_split("", 11, 1) == Stages{{0, 10}});
  CHECK(parse_split("10", 11, 2) == Stages{{0, 9}, {10, 10}});
  CHECK(parse_split("1,2,3", 4, 4) == Stages{{0, 0}, {1, 1}, {2, 2}, {3, 3}});
}

TEST_CASE("stage_split: split points of the wrong count say how many are needed") {
  CHECK(throws_error_mentioning([] { parse_split("4", 11, 3); },
                                {"'4'", "3 stages need 2 split points", "got 1", "'3,7' splits the 11 layers evenly"}));
  CHECK(throws_error_mentioning([] { parse_split("4,7", 11, 1); }, {"1 stages need 0 split points", "got 2"}));
  CHECK(throws_error_mentioning([] { parse_split("", 11, 2); }, {"2 stages need 1 split points", "got 0"}));
}

TEST_CASE("stage_split: a split point that is not a layer index is refused") {
  CHECK(throws_error_mentioning([] { parse_split("4,x", 11, 3); }, {"'4,x'", "'x' is not a layer index"}));
  CHECK(throws_error_mentioning([] { parse_split("-1,4", 11, 3); }, {"'-1' is not a layer index"}));
  CHECK(throws_error_mentioning([] { parse_split("4,,7", 11, 4); }, {"'' is not a layer index"}));
  CHECK(throws_error_mentioning([] { parse_split("4.5", 11, 2); }, {"'4.5' is not a layer index"}));
}

TEST_CASE("stage_split: split points must lie inside the model") {
  CHECK(throws_error_mentioning([] { parse_split("0,7", 11, 3); },
                                {"stage 1 cannot start at layer 0", "1-10", "11 layers"}));
  CHECK(throws_error_mentioning([] { parse_split("4,11", 11, 3); },
                                {"stage 2 cannot start at layer 11", "1-10", "11 layers"}));
}

TEST_CASE("stage_split: split points that do not increase name the stage they leave empty") {
  CHECK(throws_error_mentioning([] { parse_split("7,4", 11, 3); },
                                {"stage 1 would be empty", "starts at layer 7", "stage 2 at layer 4",
                                 "strictly increasing"}));
  CHECK(throws_error_mentioning([] { parse_split("3,5,5", 11, 4); },
                                {"stage 2 would be empty", "starts at layer 5", "stage 3 at layer 5"}));
}

TEST_CASE("stage_split: a split needs between 1 and as many stages as layers") {
  CHECK(throws_error_mentioning([] { parse_split("", 11, 0); }, {"stages must be at least 1", "got 0"}));
  CHECK(throws_error_mentioning([] { parse_split("1,2", 2, 3); }, {"3 stages for 2 layers"}));
  CHECK(throws_error_mentioning([] { balanced_split({1.0, 2.0}, 0); }, {"stages must be at least 1", "got 0"}));
  CHECK(throws_error_mentioning([] { balanced_split({1.0, 2.0}, 3); }, {"3 stages for 2 layers"}));
  CHECK(throws_error_mentioning([] { balanced_split({}, 1); }, {"1 stages for 0 layers"}));
}

TEST_CASE("stage_split: a negative or non-finite cost is refused naming its layer") {
  CHECK(throws_error_mentioning([] { balanced_split({1.0, 0.0, -2.0}, 2); }, {"layer 2", "-2"}));
  CHECK(throws_error_mentioning([] { balanced_split({std::numeric_limits<double>::quiet_NaN(), 1.0}, 2); },
                                {"layer 0", "nan"}));
  CHECK(throws_error_mentioning([] { balanced_split({1.0, std::numeric_limits<double>::infinity()}, 2); },
                                {"layer 1", "inf"}));
}

TEST_CASE("stage_split: balanced splits equal the brute force's, ties included") {
  // Small whole-number costs, half of them 0, so ties abound and sum exactly.
  std::mt19937 rng(14);
  for (int trial = 0; trial < 600; ++trial) {
    const std::size_t layers = std::uniform_int_distribution<std::size_t>(1, 9)(rng);
    const int stages = std::uniform_int_distribution<int>(1, static_cast<int>(layers))(rng);
    std::vector<double> costs;
    for (std::size_t i = 0; i < layers; ++i) {
      costs.push_back(rng() % 2 == 0 ? 0.0 : static_cast<double>(std::uniform_int_distribution<int>(1, 4)(rng)));
    }
    const std::string listed = fmt::format("{}", fmt::join(costs, ","));
    CAPTURE(listed);
    CAPTURE(stages);
    const Stages split = balanced_split(costs, stages);
    check_covers(split, layers, stages);
    CHECK(split == brute_force_split(costs, stages));
  }
}

TEST_CASE("stage_split: balanced splits of real-valued costs reach the smallest largest stage") {
  std::mt19937 rng(41);
  std::uniform_real_distribution<double> cost(0.0, 1.0);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t layers = std::uniform_int_distribution<std::size_t>(1, 9)(rng);
    const int stages = std::uniform_int_distribution<int>(1, static_cast<int>(layers))(rng);
    std::vector<double> costs;
    for (std::size_t i = 0; i < layers; ++i) costs.push_back(cost(rng));
    CAPTURE(trial);
    const Stages split = balanced_split(costs, stages);
    check_covers(split, layers, stages);
    CHECK(largest_stage_cost(costs, split) ==
          doctest::Approx(largest_stage_cost(costs, brute_force_split(costs, stages))).epsilon(1e-12));
  }
}

TEST_CASE("stage_split: ties go to the most even layer counts, then to shorter earlier stages") {
  // Every split of free layers costs 0: the counts decide.
  CHECK(balanced_split(std::vector<double>(6, 0.0), 2) == Stages{{0, 2}, {3, 5}});
  CHECK(balanced_split(std::vector<double>(6, 0.0), 4) == Stages{{0, 0}, {1, 1}, {2, 3}, {4, 5}});
  // Any boundary keeps the largest stage at 4; 4 + 5 layers beats 5 + 4 as the earlier stage is shorter.
  CHECK(balanced_split({4, 0, 0, 0, 0, 0, 0, 0, 4}, 2) == Stages{{0, 3}, {4, 8}});
  // Equal layers: as even as the count allows, the shorter stages first.
  CHECK(balanced_split(std::vector<double>(11, 1.0), 3) == Stages{{0, 2}, {3, 6}, {7, 10}});
}

TEST_CASE("stage_split: the smallest largest stage comes before even layer counts") {
  CHECK(balanced_split({1, 1, 1, 1, 6}, 2) == Stages{{0, 3}, {4, 4}});
  CHECK(balanced_split({10, 1, 1, 1, 1}, 3) == Stages{{0, 0}, {1, 2}, {3, 4}});
}

TEST_CASE("stage_split: one stage takes every layer, as many stages as layers take one each") {
  const std::vector<double> costs{3, 0, 1, 4, 1, 5};
  CHECK(balanced_split(costs, 1) == Stages{{0, 5}});
  CHECK(balanced_split(costs, 6) == Stages{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}});
}

TEST_CASE("stage_split: stages begin only where they may, the layers between staying together") {
  // Layers 2-4 and 7-8 stay together (a tensor-parallel pair's sharded activation between).
  const std::vector<bool> may_begin{true, true, true, false, false, true, true, true, false};
  const std::vector<double> costs(9, 1.0);
  CHECK(balanced_split(costs, 1, may_begin) == Stages{{0, 8}});
  // Without the constraint 3 + 3 + 3. With it the largest stage holds 4 layers at best, and of the splits that
  // reach it 2 + 3 + 4 is the most even, tied with 2 + 4 + 3, whose split points come later.
  CHECK(balanced_split(costs, 3) == Stages{{0, 2}, {3, 5}, {6, 8}});
  const Stages three = balanced_split(costs, 3, may_begin);
  CHECK(three == Stages{{0, 1}, {2, 4}, {5, 8}});
  for (const StageRange& stage : three) CHECK(may_begin[stage.first]);
  // Every place to cut used: six stages; a seventh has nowhere to go.
  CHECK(balanced_split(costs, 6, may_begin) == Stages{{0, 0}, {1, 1}, {2, 4}, {5, 5}, {6, 6}, {7, 8}});
  CHECK(throws_error_mentioning([&] { balanced_split(costs, 7, may_begin); },
                                {"7 stages", "only 5 places", "layers 2-4, 7-8 stay together", "at most 6 stages"}));
  CHECK(throws_error_mentioning([&] { balanced_split(costs, 2, std::vector<bool>(3, true)); },
                                {"9 layer costs but 3 places"}));
}

// The largest total of any rank's chunks.
double largest_rank_total(const std::vector<double>& costs, const Stages& stages, int ranks,
                          parallel::ChunkLayout layout) {
  std::vector<double> totals(static_cast<std::size_t>(ranks), 0.0);
  for (std::size_t k = 0; k < stages.size(); ++k) {
    totals[static_cast<std::size_t>(parallel::stage_holder(layout, static_cast<int>(k), ranks).rank)] +=
        stage_cost(costs, stages[k]);
  }
  return *std::max_element(totals.begin(), totals.end());
}

TEST_CASE("stage_split: chunked splits even out each rank's total, never worse than the stages' own balance") {
  using parallel::ChunkLayout;
  // Two ranks in a V hold stages 0 + 3 and 1 + 2: balanced_split's
  // {0-2, 3-3, 4-5, 6-7} (largest stage 5) leaves rank 0 with 4 and rank 1
  // with 7 of 11; moving boundaries reaches the best, 5 and 6 (by brute
  // force).
  const std::vector<double> costs{1, 1, 1, 5, 1, 1, 0.5, 0.5};
  const Stages split =
      parallel::balanced_chunk_split(costs, 2, 2, ChunkLayout::v_shape, std::vector<bool>(costs.size(), true));
  check_covers(split, costs.size(), 4);
  double best = std::numeric_limits<double>::infinity();
  for_each_split(costs.size(), 4, [&](const Stages& candidate) {
    best = std::min(best, largest_rank_total(costs, candidate, 2, ChunkLayout::v_shape));
  });
  CHECK(largest_rank_total(costs, split, 2, ChunkLayout::v_shape) == best);
  // Random costs, both layouts, 2 and 3 ranks of 2 and 3 chunks.
  std::mt19937 random(7);
  std::uniform_real_distribution<double> cost(0.0, 10.0);
  for (int trial = 0; trial < 50; ++trial) {
    for (const ChunkLayout layout : {ChunkLayout::looped, ChunkLayout::v_shape}) {
      for (const int ranks : {2, 3}) {
        for (const int chunks : {2, 3}) {
          CAPTURE(trial);
          CAPTURE(ranks);
          CAPTURE(chunks);
          std::vector<double> layer_costs(static_cast<std::size_t>(ranks * chunks + 5));
          for (double& c : layer_costs) c = cost(random);
          const std::vector<bool> anywhere(layer_costs.size(), true);
          const Stages chunked = parallel::balanced_chunk_split(layer_costs, ranks, chunks, layout, anywhere);
          check_covers(chunked, layer_costs.size(), ranks * chunks);
          CHECK(largest_rank_total(layer_costs, chunked, ranks, layout) <=
                largest_rank_total(layer_costs, balanced_split(layer_costs, ranks * chunks), ranks, layout));
        }
      }
    }
  }
  CHECK(parallel::balanced_chunk_split(costs, 4, 1, ChunkLayout::looped, std::vector<bool>(costs.size(), true)) ==
        balanced_split(costs, 4));
}

TEST_CASE("stage_split: mnist_cnn by parameters puts its large Dense layer in the largest stage") {
  const layers::LayerList layers = models::model_layers("mnist_cnn");
  const std::vector<double> costs = layer_costs(layers, StageBalance::Parameters, {}, 0);
  REQUIRE(costs.size() == 11);
  CHECK(costs[kMnistDense] == 4.0 * (9216 * 128 + 128));
  CHECK(costs[kMnistDense] > 0.98 * stage_cost(costs, {0, 10}));

  // Layers 3-7 are free or the Dense itself, so any boundary there ties; 5 + 6 layers is the most even.
  const Stages two = balanced_split(costs, 2);
  CHECK(two == Stages{{0, 4}, {5, 10}});
  CHECK(stage_cost(costs, two[1]) == largest_stage_cost(costs, two));
  CHECK(two[1].first <= kMnistDense);
  CHECK(kMnistDense <= two[1].last);
  // Over three stages the Dense layer is its stage's only cost.
  CHECK(balanced_split(costs, 3) == Stages{{0, 3}, {4, 7}, {8, 10}});

  const std::string table = parallel::format_stages(two, costs, StageBalance::Parameters);
  CHECK(table.find("param MiB") != std::string::npos);
  CHECK(table.find("0-4") != std::string::npos);
  CHECK(table.find("5-10") != std::string::npos);
  CHECK(table.find("4.51") != std::string::npos);  // (1,179,776 + 1,290) * 4 bytes
  CHECK(table.find("98.4%") != std::string::npos);
  CHECK(table.find("1.6%") != std::string::npos);
}

TEST_CASE("stage_split: mnist_cnn by layer count splits 5 + 6") {
  const std::vector<double> costs = layer_costs(models::model_layers("mnist_cnn"), StageBalance::Layers, {}, 0);
  CHECK(costs == std::vector<double>(11, 1.0));
  const Stages two = balanced_split(costs, 2);
  CHECK(two == Stages{{0, 4}, {5, 10}});
  const std::string table = parallel::format_stages(two, costs, StageBalance::Layers);
  CHECK(table.find("count") != std::string::npos);
  CHECK(table.find("45.5%") != std::string::npos);
  CHECK(table.find("54.5%") != std::string::npos);
}

TEST_CASE("stage_split: measured times give one positive cost per layer") {
  const std::vector<double> costs = layer_costs(small_mlp(), StageBalance::Time, {20}, 4);
  REQUIRE(costs.size() == 3);
  for (const double seconds : costs) CHECK(seconds > 0.0);
  const std::string table = parallel::format_stages(balanced_split(costs, 2), costs, StageBalance::Time);
  CHECK(table.find("fwd+bwd ms") != std::string::npos);
}

TEST_CASE("stage_split: measured times of mnist_cnn follow the shapes through every layer") {
  const std::vector<double> costs =
      layer_costs(models::model_layers("mnist_cnn"), StageBalance::Time, kMnistSample, 8);
  REQUIRE(costs.size() == 11);
  for (const double seconds : costs) CHECK(seconds > 0.0);
  check_covers(balanced_split(costs, 2), 11, 2);
}

TEST_CASE("stage_split: measuring times leaves the default generator as it was") {
  manual_seed(5);
  default_generator().advance(17);
  layer_costs(models::model_layers("mnist_cnn"), StageBalance::Time, kMnistSample, 2);  // dropout draws masks
  CHECK(default_generator().seed() == 5);
  CHECK(default_generator().offset() == 17);
}

TEST_CASE("stage_split: measuring times names the layer that refuses its input") {
  // 27x27 images reach the Dense layer as 64 x 11 x 11 = 7744 features, not 9216.
  CHECK(throws_error_mentioning(
      [] { layer_costs(models::model_layers("mnist_cnn"), StageBalance::Time, {1, 27, 27}, 2); },
      {"layer 7", "Dense", "[2, 7744]"}));
  CHECK(throws_error_mentioning([] { layer_costs(small_mlp(), StageBalance::Time, {20}, 0); },
                                {"batch must be at least 1", "got 0"}));
}

TEST_CASE("stage_split: measured times split each backward into B and W, and carry each layer's output size") {
  const std::vector<parallel::LayerTime> times = parallel::layer_times(small_mlp(), {20}, 4);
  REQUIRE(times.size() == 3);
  for (const parallel::LayerTime& time : times) {
    CHECK(time.forward > 0.0);
    CHECK(time.backward > 0.0);
    CHECK(time.total() == time.forward + time.backward + time.weight);
  }
  CHECK(times[0].weight > 0.0);   // Dense 20->30: W is its weight's product
  CHECK(times[1].weight == 0.0);  // ReLU: no weights, no W
  CHECK(times[2].weight > 0.0);
  // Outputs of 4 x 30, 4 x 30 and 4 x 5 floats.
  CHECK(times[0].output_bytes == 480);
  CHECK(times[1].output_bytes == 480);
  CHECK(times[2].output_bytes == 80);
  // A convolution's weight gradient is a W too.
  const std::vector<parallel::LayerTime> cnn = parallel::layer_times(models::model_layers("mnist_cnn"), kMnistSample, 2);
  CHECK(cnn[0].weight > 0.0);
  CHECK(cnn[1].weight == 0.0);
}

namespace {

// Four layers of equal times; the outputs of layers 0 and 1 are large,
// layer 2's tiny.
std::vector<parallel::LayerTime> four_layers() {
  std::vector<parallel::LayerTime> times(4, {.forward = 1.0, .backward = 1.0, .weight = 1.0, .output_bytes = 1'000'000});
  times[2].output_bytes = 1;
  return times;
}

}  // namespace

TEST_CASE("stage_split: the simulated step sums each stage's layers and prices each boundary's message") {
  using parallel::PipelineSchedule;
  const std::vector<parallel::LayerTime> times = four_layers();
  const std::vector<StageRange> even{{0, 1}, {2, 3}};
  // Without a link cost: 2 stages of F = B = W = 2, 1F1B with W at the
  // batch's end, 4 micro-batches: the simulator's own step for those costs.
  const double free = parallel::simulated_step_seconds(times, even, PipelineSchedule::OneFOneB, 4,
                                                       parallel::WeightGradients::at_batch_end, {});
  const double expected = parallel::steady_step_time(
      parallel::pipeline_actions(PipelineSchedule::OneFOneB, 2, 4, parallel::WeightGradients::at_batch_end),
      {.forward_per_stage = {2.0, 2.0}, .backward_per_stage = {2.0, 2.0}, .weight_per_stage = {2.0, 2.0}});
  CHECK(free == expected);
  // A message across the cut after layer 1 (1 MB at 1 us per kB, plus 0.5):
  // the same lists with that latency.
  const parallel::cost::Link link{.alpha = 0.5, .beta = 1e-6};
  const double priced = parallel::simulated_step_seconds(times, even, PipelineSchedule::OneFOneB, 4,
                                                         parallel::WeightGradients::at_batch_end, link);
  CHECK(priced == parallel::steady_step_time(
                      parallel::pipeline_actions(PipelineSchedule::OneFOneB, 2, 4,
                                                 parallel::WeightGradients::at_batch_end),
                      {.forward_per_stage = {2.0, 2.0},
                       .backward_per_stage = {2.0, 2.0},
                       .weight_per_stage = {2.0, 2.0},
                       .latency_per_boundary = {1.5}}));
  CHECK(priced > free);
}

TEST_CASE("stage_split: balancing by the schedule's step moves a cut off a large message, never to a slower step") {
  using parallel::PipelineSchedule;
  const std::vector<parallel::LayerTime> times = four_layers();
  const std::vector<bool> anywhere(4, true);
  for (const PipelineSchedule schedule :
       {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::ZeroBubbleH1,
        PipelineSchedule::ZeroBubbleH2}) {
    CAPTURE(parallel::pipeline_schedule_name(schedule));
    const auto weights = parallel::places_weights(schedule) ? parallel::WeightGradients::per_micro_batch
                                                            : parallel::WeightGradients::at_batch_end;
    // Free messages: the even split of equal layers is already the best.
    CHECK(parallel::schedule_balanced_split(times, 2, schedule, 4, weights, {}, anywhere) ==
          std::vector<StageRange>{{0, 1}, {2, 3}});
    // 10 s for the message after layer 1, nothing after layer 2: the cut
    // moves past layer 2, though the stages become 3 : 1.
    const parallel::cost::Link slow{.beta = 1e-5};
    const std::vector<StageRange> moved = parallel::schedule_balanced_split(times, 2, schedule, 4, weights, slow, anywhere);
    CHECK(moved == std::vector<StageRange>{{0, 2}, {3, 3}});
    CHECK(parallel::simulated_step_seconds(times, moved, schedule, 4, weights, slow) <
          parallel::simulated_step_seconds(times, {{0, 1}, {2, 3}}, schedule, 4, weights, slow));
    // Where no stage may begin at layer 3, none does, and the step is no
    // slower than the even split's (1f1b and zb-h2 then prefer 1 : 3, the
    // same slow message but the lighter stage first).
    const std::vector<StageRange> kept =
        parallel::schedule_balanced_split(times, 2, schedule, 4, weights, slow, {true, true, true, false});
    CHECK(kept[1].first != 3);
    CHECK(parallel::simulated_step_seconds(times, kept, schedule, 4, weights, slow) <=
          parallel::simulated_step_seconds(times, {{0, 1}, {2, 3}}, schedule, 4, weights, slow));
  }
  CHECK_THROWS_WITH_AS(parallel::schedule_balanced_split(times, 2, PipelineSchedule::ZeroBubbleV, 4,
                                                         parallel::WeightGradients::per_micro_batch, {}, anywhere),
                       "schedule_balanced_split: the zb-v schedule holds several chunks per rank; balance them with "
                       "balanced_chunk_split",
                       Error);
}

TEST_CASE("stage_split: the table refuses stages that do not cover the layers") {
  const std::vector<double> costs(4, 1.0);
  CHECK(throws_error_mentioning([&] { parallel::format_stages({{0, 1}, {3, 3}}, costs, StageBalance::Layers); },
                                {"stage 1 runs layers 3-3", "start at layer 2"}));
  CHECK(throws_error_mentioning([&] { parallel::format_stages({{0, 1}}, costs, StageBalance::Layers); },
                                {"end at layer 1", "4 layers"}));
}

}  // namespace
}  // namespace ddl::test
