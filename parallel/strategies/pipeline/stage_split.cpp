// Splitting a model into pipeline stages (see stage_split.hpp).
#include <ddl/parallel/strategies/pipeline/stage_split.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/ranges.h>

#include <ddl/core/check.hpp>
#include <ddl/core/deferred_gradients.hpp>
#include <ddl/parallel/choice_by_name.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/random.hpp>

namespace ddl::parallel {
namespace {

constexpr std::array kBalances = {StageBalance::Layers, StageBalance::Parameters, StageBalance::Time};
// Timed forward + backward runs per layer; the median of an odd count is one
// of them, and a few are enough to shed a run the OS interrupted.
constexpr int kTimedRuns = 5;

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// "4, 7" -> {"4", "7"}; "4,,7" keeps its empty point, and "" (one stage) has none.
std::vector<std::string_view> split_at_commas(std::string_view text) {
  std::vector<std::string_view> tokens;
  if (trim(text).empty()) return tokens;
  for (std::size_t start = 0;;) {
    const auto comma = text.find(',', start);
    tokens.push_back(trim(text.substr(start, comma - start)));
    if (comma == std::string_view::npos) return tokens;
    start = comma + 1;
  }
}

void check_stage_count(std::size_t layers, int stages) {
  DDL_CHECK(stages >= 1, "pipeline split: stages must be at least 1, got {}", stages);
  DDL_CHECK(static_cast<std::size_t>(stages) <= layers,
            "pipeline split: {} stages for {} layers; every stage needs at least one layer", stages, layers);
}

// The split points of `stages`, as parse_split takes them: "4,7".
std::string format_points(const std::vector<StageRange>& stages) {
  std::vector<std::size_t> points;
  for (std::size_t s = 1; s < stages.size(); ++s) points.push_back(stages[s].first);
  return fmt::format("{}", fmt::join(points, ","));
}

// The total cost of layers [begin, end), from prefix sums. Every stage cost
// goes through this one subtraction, so a split's largest cost compares
// exactly with the smallest maximum found, and whole-number costs (layer
// counts, bytes below 2^53) tie exactly.
class PrefixSums {
 public:
  explicit PrefixSums(const std::vector<double>& costs) : sums_(costs.size() + 1, 0.0) {
    for (std::size_t i = 0; i < costs.size(); ++i) sums_[i + 1] = sums_[i] + costs[i];
  }
  double range(std::size_t begin, std::size_t end) const { return sums_[end] - sums_[begin]; }

 private:
  std::vector<double> sums_;
};

// A table indexed [stages][first layer], for the dynamic programmes over
// suffixes of the layers.
template <class T>
using SuffixTable = std::vector<std::vector<T>>;

// smallest_max[j][i]: the smallest largest stage cost of layers i..L-1 cut
// into j stages (where L - i >= j). The first stage is [i, k), k a layer a
// stage may begin at, and the rest must leave at least one layer to each
// of the other j - 1 stages.
double smallest_largest_cost(const PrefixSums& sums, std::size_t layers, std::size_t stages,
                             const std::vector<bool>& may_begin) {
  constexpr double kUnreached = std::numeric_limits<double>::infinity();
  SuffixTable<double> smallest_max(stages + 1, std::vector<double>(layers + 1, kUnreached));
  for (std::size_t i = 0; i < layers; ++i) smallest_max[1][i] = sums.range(i, layers);
  for (std::size_t j = 2; j <= stages; ++j) {
    for (std::size_t i = 0; i + j <= layers; ++i) {
      for (std::size_t k = i + 1; k + j - 1 <= layers; ++k) {
        if (!may_begin[k]) continue;
        smallest_max[j][i] = std::min(smallest_max[j][i], std::max(sums.range(i, k), smallest_max[j - 1][k]));
      }
    }
  }
  return smallest_max[stages][0];
}

// Refuses more stages than there are places a stage may begin at, naming
// the layers that must stay together.
void check_places_to_cut(const std::vector<bool>& may_begin, int stages) {
  std::size_t places = 1;  // layer 0
  std::string together;
  for (std::size_t i = 1, first = 0; i <= may_begin.size(); ++i) {
    if (i < may_begin.size() && !may_begin[i]) continue;
    if (i - first > 1) together += fmt::format("{}{}-{}", together.empty() ? "" : ", ", first, i - 1);
    if (i < may_begin.size()) ++places;
    first = i;
  }
  DDL_CHECK(static_cast<std::size_t>(stages) <= places,
            "pipeline split: {} stages, but the {} layers may be cut in only {} places (layers {} stay together), so "
            "at most {} stages",
            stages, may_begin.size(), places - 1, together, places);
}

// Restores the default generator when measuring ends, however it ends: the
// dropout layers being timed draw their masks from it, and measuring must
// not change the training run that follows.
class DefaultGeneratorRestorer {
 public:
  DefaultGeneratorRestorer() : seed_(default_generator().seed()), offset_(default_generator().offset()) {}
  ~DefaultGeneratorRestorer() { default_generator().set_state(seed_, offset_); }
  DefaultGeneratorRestorer(const DefaultGeneratorRestorer&) = delete;
  DefaultGeneratorRestorer& operator=(const DefaultGeneratorRestorer&) = delete;

 private:
  std::uint64_t seed_;
  std::uint64_t offset_;
};

// [batch, sample...]
Shape with_batch(std::int64_t batch, const Shape& sample) {
  DDL_CHECK(sample.rank() < Shape::kMaxDims,
            "layer_costs: the sample shape {} leaves no room for the batch dimension (at most {} dims)", sample,
            Shape::kMaxDims - 1);
  std::vector<std::int64_t> dims{batch};
  for (int d = 0; d < sample.rank(); ++d) dims.push_back(sample[d]);
  return Shape(dims);
}

// A GPU runs its queue after the host returns; the timed interval must hold the work.
void wait_for(const Device& device) {
  if (device.is_cuda()) cuda_backend::synchronize(device.index());
}

// A layer's forward, its backward for the input (B) and for its weights
// (W, the gradients a pipeline defers: core/deferred_gradients.hpp), each
// timed on its own.
std::array<double, 3> forward_backward_seconds(layers::Module& layer, const Tensor& input,
                                               const Tensor& output_gradient, const Device& device) {
  layer.zero_grad();  // as a training step starts, so backward writes rather than accumulates
  input.zero_grad();
  autograd::DeferredWeightGradients deferred(layer.parameters());
  const auto start = std::chrono::steady_clock::now();
  const Tensor output = layer(input);
  wait_for(device);
  const auto forward = std::chrono::steady_clock::now();
  deferred.backward_inputs(output, output_gradient, 0);
  wait_for(device);
  const auto backward = std::chrono::steady_clock::now();
  const bool has_weights = deferred.weights() > 0;
  deferred.backward_weights();
  wait_for(device);
  const auto seconds = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
  return {seconds(start, forward), seconds(forward, backward),
          has_weights ? seconds(backward, std::chrono::steady_clock::now()) : 0.0};
}

// The medians of kTimedRuns runs (each part's own), after an untimed one
// that pays the first call's costs (the allocator's pool, cuDNN's algorithm
// search) and tells the output's shape.
LayerTime time_layer(layers::Module& layer, const Tensor& input, const Device& device, Shape& output_shape) {
  Tensor output_gradient;
  {
    const Tensor output = layer(input);
    output_gradient = ones_like(output);
  }
  forward_backward_seconds(layer, input, output_gradient, device);
  std::array<std::vector<double>, 3> seconds;
  for (int run = 0; run < kTimedRuns; ++run) {
    const std::array<double, 3> parts = forward_backward_seconds(layer, input, output_gradient, device);
    for (std::size_t part = 0; part < parts.size(); ++part) seconds[part].push_back(parts[part]);
  }
  const auto median = [](std::vector<double>& values) {
    const auto middle = values.begin() + kTimedRuns / 2;
    std::nth_element(values.begin(), middle, values.end());
    return *middle;
  };
  output_shape = output_gradient.shape();
  return {.forward = median(seconds[0]),
          .backward = median(seconds[1]),
          .weight = median(seconds[2]),
          .output_bytes = static_cast<std::int64_t>(output_gradient.nbytes())};
}

}  // namespace

std::vector<LayerTime> layer_times(const layers::LayerList& layers, const Shape& sample_shape, std::int64_t batch,
                                   const Device& device) {
  DDL_CHECK(batch >= 1, "layer_costs: the batch must be at least 1, got {}", batch);
  check_device_exists(device);
  const DefaultGeneratorRestorer restorer;
  Generator scratch(0);
  Shape input_shape = with_batch(batch, sample_shape);
  std::vector<LayerTime> times;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    // Only this layer and its input live here, freed before the next is built.
    const std::shared_ptr<layers::Module> layer = layers.build_layer(i, &scratch);
    layer->to(device);
    const Tensor input =
        uniform(input_shape, -1.0f, 1.0f, TensorOptions{}.with_device(device).with_requires_grad(), &scratch);
    Shape output_shape;
    try {
      times.push_back(time_layer(*layer, input, device, output_shape));
    } catch (const Error& error) {
      detail::fail("layer_costs: layer {} ({}) on an input of {}: {}", i, layer->describe(), input_shape,
                   error.what());
    }
    DDL_CHECK(output_shape.rank() >= 1 && output_shape[0] == batch,
              "layer_costs: layer {} ({}) turned an input of {} into {}; the batch must stay the first dimension", i,
              layer->describe(), input_shape, output_shape);
    input_shape = output_shape;
  }
  return times;
}

namespace {

// How format_stages shows a cost: its column's header and the factor from
// the cost's own unit (layers, bytes, seconds).
struct CostUnit {
  std::string_view header;
  double scale;
  int decimals;
};

CostUnit cost_unit(StageBalance balance) {
  switch (balance) {
    case StageBalance::Layers: return {"count", 1.0, 0};
    case StageBalance::Parameters: return {"param MiB", 1.0 / (1024.0 * 1024.0), 2};
    case StageBalance::Time: return {"fwd+bwd ms", 1e3, 3};
  }
  return {"cost", 1.0, 3};
}

void check_stages_cover(const std::vector<StageRange>& stages, std::size_t layers) {
  std::size_t next = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    DDL_CHECK(stages[s].first == next && stages[s].first <= stages[s].last,
              "format_stages: stage {} runs layers {}-{}, but should start at layer {} and not run backwards", s,
              stages[s].first, stages[s].last, next);
    next = stages[s].last + 1;
  }
  DDL_CHECK(!stages.empty() && next == layers, "format_stages: the {} stages end at layer {}, but there are {} layers",
            stages.size(), next == 0 ? 0 : next - 1, layers);
}

}  // namespace

StageBalance parse_stage_balance(std::string_view name) {
  return choice_by_name(name, kBalances, stage_balance_name, "stage balance");
}

std::vector<StageBalance> all_stage_balances() { return {kBalances.begin(), kBalances.end()}; }

std::string_view stage_balance_name(StageBalance balance) {
  switch (balance) {
    case StageBalance::Layers: return "layers";
    case StageBalance::Parameters: return "parameters";
    case StageBalance::Time: return "time";
  }
  return "unknown";
}

std::vector<StageRange> parse_split(std::string_view text, std::size_t layers, int stages) {
  check_stage_count(layers, stages);
  const std::vector<std::string_view> tokens = split_at_commas(text);
  const auto points_needed = static_cast<std::size_t>(stages - 1);
  DDL_CHECK(tokens.size() == points_needed,
            "pipeline split '{}': {} stages need {} split points (the first layer of every stage after the first; "
            "'{}' splits the {} layers evenly), got {}",
            text, stages, points_needed, format_points(balanced_split(std::vector<double>(layers, 1.0), stages)),
            layers, tokens.size());

  std::vector<StageRange> result;
  std::size_t first = 0;  // of the stage being read
  for (std::size_t s = 0; s < tokens.size(); ++s) {
    const std::string_view token = tokens[s];
    std::size_t point = 0;
    const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), point);
    DDL_CHECK(!token.empty() && error == std::errc() && end == token.data() + token.size(),
              "pipeline split '{}': '{}' is not a layer index", text, token);
    DDL_CHECK(point >= 1 && point < layers,
              "pipeline split '{}': stage {} cannot start at layer {}: split points lie in 1-{} (stage 0 starts at "
              "layer 0; the model has {} layers)",
              text, s + 1, point, layers - 1, layers);
    DDL_CHECK(point > first,
              "pipeline split '{}': stage {} would be empty: it starts at layer {} and stage {} at layer {}; split "
              "points must be strictly increasing",
              text, s, first, s + 1, point);
    result.push_back({first, point - 1});
    first = point;
  }
  result.push_back({first, layers - 1});
  return result;
}

std::vector<StageRange> balanced_split(const std::vector<double>& layer_costs, int stages) {
  return balanced_split(layer_costs, stages, std::vector<bool>(layer_costs.size(), true));
}

std::vector<StageRange> balanced_split(const std::vector<double>& layer_costs, int stages,
                                       const std::vector<bool>& may_begin) {
  const std::size_t layers = layer_costs.size();
  check_stage_count(layers, stages);
  DDL_CHECK(may_begin.size() == layers, "pipeline split: {} layer costs but {} places to cut", layers,
            may_begin.size());
  for (std::size_t i = 0; i < layers; ++i) {
    DDL_CHECK(std::isfinite(layer_costs[i]) && layer_costs[i] >= 0.0,
              "pipeline split: the cost of layer {} must be finite and at least 0, got {}", i, layer_costs[i]);
  }
  check_places_to_cut(may_begin, stages);
  const PrefixSums sums(layer_costs);
  const auto stage_count = static_cast<std::size_t>(stages);
  // Two passes, because the tie-break cannot ride along in the first: once a
  // first stage alone reaches the maximum, the rest may take any split under
  // it, not only the one whose own maximum is smallest.
  const double largest = smallest_largest_cost(sums, layers, stage_count, may_begin);

  // squares[j][i]: the smallest sum of squared stage sizes of layers i..L-1
  // cut into j stages that each cost at most `largest` (kNone: no such cut).
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  SuffixTable<std::size_t> squares(stage_count + 1, std::vector<std::size_t>(layers + 1, kNone));
  for (std::size_t i = 0; i < layers; ++i) {
    if (sums.range(i, layers) <= largest) squares[1][i] = (layers - i) * (layers - i);
  }
  // The smallest sum of squares of a j-stage cut of i..L-1 whose first
  // stage is [i, k); kNone where the next stage may not begin at k, that
  // stage costs too much or the rest cannot be cut.
  const auto squares_after = [&](std::size_t j, std::size_t i, std::size_t k) {
    if (!may_begin[k] || sums.range(i, k) > largest || squares[j - 1][k] == kNone) return kNone;
    return (k - i) * (k - i) + squares[j - 1][k];
  };
  for (std::size_t j = 2; j <= stage_count; ++j) {
    for (std::size_t i = 0; i + j <= layers; ++i) {
      for (std::size_t k = i + 1; k + j - 1 <= layers; ++k) {
        squares[j][i] = std::min(squares[j][i], squares_after(j, i, k));
      }
    }
  }

  // Walk forward taking the shortest first stage that stays optimal, which
  // gives the lexicographically smallest split points.
  std::vector<StageRange> result;
  std::size_t first = 0;
  for (std::size_t j = stage_count; j > 1; --j) {
    std::size_t next = first + 1;
    while (squares_after(j, first, next) != squares[j][first]) ++next;
    result.push_back({first, next - 1});
    first = next;
  }
  result.push_back({first, layers - 1});
  return result;
}

namespace {

// A stage's F, B and W: the sums of its layers'.
LayerTime stage_time(const std::vector<LayerTime>& times, const StageRange& stage) {
  LayerTime sum;
  for (std::size_t l = stage.first; l <= stage.last; ++l) {
    sum.forward += times[l].forward;
    sum.backward += times[l].backward;
    sum.weight += times[l].weight;
  }
  return sum;
}

// From `split`, moves one boundary by one layer at a time, each time the
// move that lowers `score` (any ordered value) the most, until none lowers
// it: a local search (steepest descent), which may stop short of the best
// split. Each move keeps every stage non-empty and every cut where a stage
// may begin, and lowers the score, so the search ends.
template <class Score>
std::vector<StageRange> improved_split(std::vector<StageRange> split, const std::vector<bool>& may_begin,
                                       Score score) {
  for (auto current = score(split);;) {
    std::optional<std::vector<StageRange>> best;
    for (std::size_t b = 1; b < split.size(); ++b) {
      for (const std::size_t begin : {split[b].first - 1, split[b].first + 1}) {
        if (begin <= split[b - 1].first || begin > split[b].last || !may_begin[begin]) continue;
        std::vector<StageRange> candidate = split;
        candidate[b - 1].last = begin - 1;
        candidate[b].first = begin;
        if (const auto value = score(candidate); value < current) {
          current = value;
          best = std::move(candidate);
        }
      }
    }
    if (!best) return split;
    split = std::move(*best);
  }
}

}  // namespace

std::vector<StageRange> balanced_chunk_split(const std::vector<double>& layer_costs, int ranks, int chunks,
                                             ChunkLayout layout, const std::vector<bool>& may_begin) {
  std::vector<StageRange> split = balanced_split(layer_costs, ranks * chunks, may_begin);
  if (chunks == 1) return split;
  const PrefixSums sums(layer_costs);
  // A split's largest rank total, then its largest stage (which sets the
  // pace of the chunks' handoffs), then the sum of the totals' squares.
  const auto score = [&](const std::vector<StageRange>& stages) {
    double largest_stage = 0.0;
    for (const StageRange& stage : stages) {
      largest_stage = std::max(largest_stage, sums.range(stage.first, stage.last + 1));
    }
    double largest = 0.0, squares = 0.0;
    for (const double total : rank_totals(layer_costs, stages, ranks, layout)) {
      largest = std::max(largest, total);
      squares += total * total;
    }
    return std::tuple{largest, largest_stage, squares};
  };
  return improved_split(std::move(split), may_begin, score);
}

double simulated_step_seconds(const std::vector<LayerTime>& times, const std::vector<StageRange>& stages,
                              PipelineSchedule schedule, int micro_batches, WeightGradients weights,
                              const cost::Link& link) {
  check_stages_cover(stages, times.size());
  PipelineCosts costs;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const LayerTime stage = stage_time(times, stages[k]);
    // A forward or backward of no measurable time still takes some: the
    // simulator wants them positive.
    constexpr double kLeast = 1e-9;
    costs.forward_per_stage.push_back(std::max(stage.forward, kLeast));
    costs.backward_per_stage.push_back(std::max(stage.backward, kLeast));
    costs.weight_per_stage.push_back(stage.weight);
    if (k + 1 < stages.size()) {
      costs.latency_per_boundary.push_back(link.seconds(static_cast<double>(times[stages[k].last].output_bytes)));
    }
  }
  const auto stage_count = static_cast<int>(stages.size());
  return steady_step_time(pipeline_actions(schedule, stage_count, micro_batches, weights), costs);
}

std::vector<StageRange> schedule_balanced_split(const std::vector<LayerTime>& times, int stages,
                                                PipelineSchedule schedule, int micro_batches,
                                                WeightGradients weights, const cost::Link& link,
                                                const std::vector<bool>& may_begin) {
  DDL_CHECK(chunks_per_rank(schedule, 0) == 1,
            "schedule_balanced_split: the {} schedule holds several chunks per rank; balance them with "
            "balanced_chunk_split",
            pipeline_schedule_name(schedule));
  std::vector<double> totals;
  for (const LayerTime& time : times) totals.push_back(time.total());
  return improved_split(balanced_split(totals, stages, may_begin), may_begin, [&](const std::vector<StageRange>& s) {
    return simulated_step_seconds(times, s, schedule, micro_batches, weights, link);
  });
}

std::vector<double> rank_totals(const std::vector<double>& layer_costs, const std::vector<StageRange>& stages,
                                int ranks, ChunkLayout layout) {
  const PrefixSums sums(layer_costs);
  std::vector<double> totals(static_cast<std::size_t>(ranks), 0.0);
  for (std::size_t k = 0; k < stages.size(); ++k) {
    totals[static_cast<std::size_t>(stage_holder(layout, static_cast<int>(k), ranks).rank)] +=
        sums.range(stages[k].first, stages[k].last + 1);
  }
  return totals;
}

std::vector<double> layer_costs(const layers::LayerList& layers, StageBalance balance, const Shape& sample_shape,
                                std::int64_t batch, const Device& device) {
  switch (balance) {
    case StageBalance::Layers: return std::vector<double>(layers.size(), 1.0);
    case StageBalance::Parameters: {
      const std::vector<std::size_t> bytes = layers.parameter_bytes();
      return {bytes.begin(), bytes.end()};
    }
    case StageBalance::Time: {
      std::vector<double> seconds;
      for (const LayerTime& time : layer_times(layers, sample_shape, batch, device)) seconds.push_back(time.total());
      return seconds;
    }
  }
  detail::fail("layer_costs: unknown stage balance {}", static_cast<int>(balance));
}

std::string format_stages(const std::vector<StageRange>& stages, const std::vector<double>& layer_costs,
                          StageBalance balance) {
  check_stages_cover(stages, layer_costs.size());
  const PrefixSums sums(layer_costs);
  const double total = sums.range(0, layer_costs.size());
  const CostUnit unit = cost_unit(balance);
  std::string out = fmt::format("{:<6} {:<10} {:>12} {:>7}\n", "stage", "layers", unit.header, "share");
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const double cost = sums.range(stages[s].first, stages[s].last + 1);
    // Every layer may cost nothing (a model without parameters): no shares then.
    const std::string share = total > 0.0 ? fmt::format("{:.1f}%", 100.0 * cost / total) : "-";
    out += fmt::format("{:<6} {:<10} {:>12.{}f} {:>7}\n", s, fmt::format("{}-{}", stages[s].first, stages[s].last),
                       cost * unit.scale, unit.decimals, share);
  }
  return out;
}

std::string format_ranges(const std::vector<StageRange>& ranges) {
  std::string text;
  for (const StageRange& range : ranges) {
    if (!text.empty()) text += ',';
    text += range.first == range.last ? fmt::format("{}", range.first) : fmt::format("{}-{}", range.first, range.last);
  }
  return text;
}

std::string format_timed_stages(const std::vector<StageRange>& stages, const std::vector<LayerTime>& times) {
  check_stages_cover(stages, times.size());
  double total = 0.0;
  for (const LayerTime& time : times) total += time.total();
  std::string out = fmt::format("{:<6} {:<10} {:>9} {:>9} {:>9} {:>10} {:>7}\n", "stage", "layers", "fwd ms", "B ms",
                                "W ms", "sends KiB", "share");
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const LayerTime sum = stage_time(times, stages[s]);
    const std::string sends =
        s + 1 < stages.size() ? fmt::format("{:.1f}", static_cast<double>(times[stages[s].last].output_bytes) / 1024.0)
                              : "-";
    const std::string share = total > 0.0 ? fmt::format("{:.1f}%", 100.0 * sum.total() / total) : "-";
    out += fmt::format("{:<6} {:<10} {:>9.3f} {:>9.3f} {:>9.3f} {:>10} {:>7}\n", s,
                       fmt::format("{}-{}", stages[s].first, stages[s].last), 1e3 * sum.forward, 1e3 * sum.backward,
                       1e3 * sum.weight, sends, share);
  }
  return out;
}

}  // namespace ddl::parallel
