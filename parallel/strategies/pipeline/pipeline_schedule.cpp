// The pipeline's schedules as action lists, and the simulator that runs all
// stages' lists together (see pipeline_schedule.hpp).
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>

#include <fmt/ranges.h>

#include <ddl/core/check.hpp>
#include <ddl/parallel/choice_by_name.hpp>

namespace ddl::parallel {

namespace {

using Kind = PipelineAction::Kind;

constexpr std::array kSchedules = {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::ZeroBubbleH1,
                                   PipelineSchedule::ZeroBubbleH2};
// How many kinds of action there are: tables indexed by kind have this many rows.
constexpr std::size_t kKindCount = 3;

std::size_t kind_index(Kind kind) { return static_cast<std::size_t>(kind); }

char kind_letter(Kind kind) {
  switch (kind) {
    case Kind::Forward: return 'F';
    case Kind::Backward: return 'B';
    case Kind::Weight: return 'W';
  }
  return '?';
}

void check_pipeline_shape(int stages, int micro_batches) {
  DDL_CHECK(stages >= 1, "pipeline: stages must be at least 1, got {}", stages);
  DDL_CHECK(micro_batches >= 1, "pipeline: micro_batches must be at least 1, got {}", micro_batches);
}

// An action on another stage, whose message an action receives.
struct Sender {
  int stage;
  PipelineAction action;
};

// Where `action` on `stage` receives its input from: the same micro-batch's
// forward on the stage before, or its backward on the stage after. The ends
// of the pipeline receive nothing (the first stage reads the batch, the last
// computes the loss).
std::optional<Sender> sender_of(const PipelineAction& action, int stage, int stages) {
  switch (action.kind) {
    case Kind::Forward:
      if (stage == 0) return std::nullopt;
      return Sender{stage - 1, action};
    case Kind::Backward:
      if (stage == stages - 1) return std::nullopt;
      return Sender{stage + 1, action};
    case Kind::Weight: return std::nullopt;  // the stage's own rows
  }
  return std::nullopt;
}

bool sends_message(const PipelineAction& action, int stage, int stages) {
  switch (action.kind) {
    case Kind::Forward: return stage < stages - 1;
    case Kind::Backward: return stage > 0;
    case Kind::Weight: return false;
  }
  return false;
}

// Whether a stage's list has Weight actions: without them each Backward
// computes its weight gradients.
bool lists_weights(const std::vector<PipelineAction>& actions) {
  return std::any_of(actions.begin(), actions.end(),
                     [](const PipelineAction& action) { return action.kind == Kind::Weight; });
}

// Each stage lists every micro-batch's forward and backward exactly once,
// the forward first (its activations are what the backward consumes), and
// a weight for every micro-batch or for none, each after its backward (the
// rows it computes from are what the backward kept).
void check_actions(const std::vector<std::vector<PipelineAction>>& actions_per_stage, int micro_batches) {
  for (std::size_t stage = 0; stage < actions_per_stage.size(); ++stage) {
    const std::vector<PipelineAction>& actions = actions_per_stage[stage];
    // position_of[kind][m]: where the stage lists that action; -1 where it does not.
    std::array<std::vector<int>, kKindCount> position_of;
    position_of.fill(std::vector<int>(static_cast<std::size_t>(micro_batches), -1));
    for (std::size_t position = 0; position < actions.size(); ++position) {
      const PipelineAction& action = actions[position];
      DDL_CHECK(action.micro_batch >= 0 && action.micro_batch < micro_batches,
                "pipeline: stage {} lists {} at position {}, but the micro-batches are 0..{} (stage 0 runs {} "
                "forwards)",
                stage, to_string(action), position, micro_batches - 1, micro_batches);
      const auto micro_batch = static_cast<std::size_t>(action.micro_batch);
      int& listed_at = position_of[kind_index(action.kind)][micro_batch];
      DDL_CHECK(listed_at < 0, "pipeline: stage {} lists {} twice, at positions {} and {}", stage, to_string(action),
                listed_at, position);
      listed_at = static_cast<int>(position);
      DDL_CHECK(action.kind != Kind::Backward || position_of[kind_index(Kind::Forward)][micro_batch] >= 0,
                "pipeline: stage {} lists {} at position {} before {}: a backward needs its forward's activations",
                stage, to_string(action), position, to_string({Kind::Forward, action.micro_batch}));
      DDL_CHECK(action.kind != Kind::Weight || position_of[kind_index(Kind::Backward)][micro_batch] >= 0,
                "pipeline: stage {} lists {} at position {} before {}: a weight gradient needs what its backward "
                "kept",
                stage, to_string(action), position, to_string({Kind::Backward, action.micro_batch}));
    }
    const bool weights_listed = lists_weights(actions);
    for (const Kind kind : {Kind::Forward, Kind::Backward, Kind::Weight}) {
      if (kind == Kind::Weight && !weights_listed) continue;
      for (int micro_batch = 0; micro_batch < micro_batches; ++micro_batch) {
        DDL_CHECK(position_of[kind_index(kind)][static_cast<std::size_t>(micro_batch)] >= 0,
                  "pipeline: stage {} never runs {} (there are {} micro-batches)", stage,
                  to_string({kind, micro_batch}), micro_batches);
      }
    }
  }
}

// One time per stage: the given ones, or `uniform` on every stage.
std::vector<double> times_per_stage(const std::vector<double>& given, double uniform, std::size_t stages,
                                    std::string_view what) {
  std::vector<double> times = given.empty() ? std::vector<double>(stages, uniform) : given;
  DDL_CHECK(times.size() == stages, "pipeline: {} times for {} stages, expected one per stage", times.size(), stages);
  for (std::size_t stage = 0; stage < stages; ++stage) {
    DDL_CHECK(std::isfinite(times[stage]) && times[stage] > 0.0,
              "pipeline: the {} time of stage {} must be positive, got {}", what, stage, times[stage]);
  }
  return times;
}

// A stage as the simulation runs it.
struct StageProgress {
  std::size_t next = 0;  // the position of its next action
  double free_at = 0.0;  // when its last action ended
  // end_of[kind][m]: when that action ended on this stage; empty until it has.
  std::array<std::vector<std::optional<double>>, kKindCount> end_of;
};

[[noreturn]] void fail_deadlock(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                                const std::vector<StageProgress>& progress) {
  const int stages = static_cast<int>(actions_per_stage.size());
  std::vector<std::string> stuck;
  for (int stage = 0; stage < stages; ++stage) {
    const auto& actions = actions_per_stage[static_cast<std::size_t>(stage)];
    const std::size_t next = progress[static_cast<std::size_t>(stage)].next;
    if (next == actions.size()) continue;
    // An action that receives nothing can always run, so a stuck one has a sender.
    const Sender sender = *sender_of(actions[next], stage, stages);
    stuck.push_back(fmt::format("stage {} is at {} (position {}), waiting for {} from stage {}", stage,
                                to_string(actions[next]), next, to_string(sender.action), sender.stage));
  }
  detail::fail("pipeline: deadlock, no stage can go on: {}", fmt::join(stuck, "; "));
}

}  // namespace

PipelineSchedule parse_pipeline_schedule(std::string_view name) {
  return choice_by_name(name, kSchedules, pipeline_schedule_name, "pipeline schedule");
}

std::vector<PipelineSchedule> all_pipeline_schedules() { return {kSchedules.begin(), kSchedules.end()}; }

std::string_view pipeline_schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::GPipe: return "gpipe";
    case PipelineSchedule::OneFOneB: return "1f1b";
    case PipelineSchedule::ZeroBubbleH1:
      return "zb-h1";
    case PipelineSchedule::ZeroBubbleH2:
      return "zb-h2";
  }
  return "unknown";
}

bool places_weights(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::ZeroBubbleH1 || schedule == PipelineSchedule::ZeroBubbleH2;
}

std::string_view weight_gradients_name(WeightGradients weights) {
  switch (weights) {
    case WeightGradients::in_backward:
      return "each backward";
    case WeightGradients::at_batch_end:
      return "batch";
    case WeightGradients::per_micro_batch:
      return "micro-batch";
  }
  return "unknown";
}

std::string to_string(const PipelineAction& action) {
  return fmt::format("{}{}", kind_letter(action.kind), action.micro_batch);
}

std::vector<PipelineAction> stage_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches,
                                          WeightGradients weights) {
  check_pipeline_shape(stages, micro_batches);
  DDL_CHECK(stage >= 0 && stage < stages, "pipeline: stage {} is out of range for {} stages (0..{})", stage, stages,
            stages - 1);
  DDL_CHECK(!places_weights(schedule) || weights == WeightGradients::per_micro_batch,
            "pipeline: the {} schedule places each micro-batch's weight gradients itself; it takes them per "
            "micro-batch",
            pipeline_schedule_name(schedule));
  std::vector<PipelineAction> actions;
  actions.reserve(3 * static_cast<std::size_t>(micro_batches));
  int forwards = 0;
  int backwards = 0;
  int weights_done = 0;
  const auto forward = [&] { actions.push_back({Kind::Forward, forwards++}); };
  // A backward, then, per micro-batch, the oldest pending weight gradients
  // until at most `held` wait.
  const auto backward = [&](int held) {
    actions.push_back({Kind::Backward, backwards++});
    if (weights != WeightGradients::per_micro_batch) return;
    while (backwards - weights_done > held) actions.push_back({Kind::Weight, weights_done++});
  };
  // ZB-H1: stage s holds back s weight gradients, the idle units 1F1B's
  // drain leaves it; ZB-H2 2s, so that stage s ends s units after stage 0;
  // the others run each right after its backward.
  const int held = schedule == PipelineSchedule::ZeroBubbleH1   ? stage
                   : schedule == PipelineSchedule::ZeroBubbleH2 ? 2 * stage
                                                                : 0;
  switch (schedule) {
    case PipelineSchedule::GPipe:
      while (forwards < micro_batches) forward();
      while (backwards < micro_batches) backward(held);
      break;
    case PipelineSchedule::OneFOneB:
    case PipelineSchedule::ZeroBubbleH1:
    case PipelineSchedule::ZeroBubbleH2: {
      // Micro-batch 0's gradient comes back only after it has crossed the
      // stages-stage-1 stages downstream, so the warm-up gives each of them a
      // micro-batch to work on meanwhile (fewer when there are fewer). From
      // then on a forward is followed by the oldest backward, so the stage
      // holds at most warm_up + 1 = stages - stage micro-batches. ZB-H2's
      // warm-up fills the whole round trip, one unit for each stage's forward
      // and one for its backward, and holds twice as many.
      const int downstream = stages - stage - 1;
      const int warm_up =
          std::min(schedule == PipelineSchedule::ZeroBubbleH2 ? 2 * downstream : downstream, micro_batches);
      while (forwards < warm_up) forward();
      while (forwards < micro_batches) {
        forward();
        backward(held);
      }
      while (backwards < micro_batches) backward(held);
      break;
    }
  }
  if (weights != WeightGradients::in_backward) {
    while (weights_done < micro_batches) actions.push_back({Kind::Weight, weights_done++});
  }
  return actions;
}

std::vector<std::vector<PipelineAction>> pipeline_actions(PipelineSchedule schedule, int stages, int micro_batches,
                                                          WeightGradients weights) {
  check_pipeline_shape(stages, micro_batches);
  std::vector<std::vector<PipelineAction>> actions;
  for (int stage = 0; stage < stages; ++stage) {
    actions.push_back(stage_actions(schedule, stage, stages, micro_batches, weights));
  }
  return actions;
}

PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                                     const PipelineCosts& costs) {
  DDL_CHECK(!actions_per_stage.empty(), "pipeline: no stages to simulate");
  const std::size_t stage_count = actions_per_stage.size();
  const int stages = static_cast<int>(stage_count);
  const int micro_batches =
      static_cast<int>(std::count_if(actions_per_stage[0].begin(), actions_per_stage[0].end(),
                                     [](const PipelineAction& action) { return action.kind == Kind::Forward; }));
  DDL_CHECK(micro_batches >= 1, "pipeline: stage 0 runs no forward, so there is no micro-batch to simulate");
  check_actions(actions_per_stage, micro_batches);
  std::array<std::vector<double>, kKindCount> duration;
  duration[kind_index(Kind::Forward)] = times_per_stage(costs.forward_per_stage, costs.forward, stage_count, "forward");
  duration[kind_index(Kind::Backward)] =
      times_per_stage(costs.backward_per_stage, costs.backward, stage_count, "backward");
  duration[kind_index(Kind::Weight)] = times_per_stage(costs.weight_per_stage, costs.weight, stage_count, "weight");
  DDL_CHECK(std::isfinite(costs.latency) && costs.latency >= 0.0, "pipeline: latency must be at least 0, got {}",
            costs.latency);

  PipelineSimulation simulation;
  simulation.micro_batches = micro_batches;
  simulation.stages.resize(stage_count);
  std::vector<StageProgress> progress(stage_count);
  for (StageProgress& stage : progress) {
    stage.end_of.fill(std::vector<std::optional<double>>(static_cast<std::size_t>(micro_batches)));
  }
  const auto end_of = [&](int stage, const PipelineAction& action) -> std::optional<double>& {
    return progress[static_cast<std::size_t>(stage)]
        .end_of[kind_index(action.kind)][static_cast<std::size_t>(action.micro_batch)];
  };

  // Sweep the stages, running each as far as its messages allow, until all
  // are done. A start time depends only on the stage's previous action and
  // the sender's end, both fixed once known, so the order of the sweep does
  // not change the result. A sweep that runs nothing is a deadlock.
  std::size_t remaining = 0;
  for (const auto& actions : actions_per_stage) remaining += actions.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int stage = 0; stage < stages; ++stage) {
      const auto& actions = actions_per_stage[static_cast<std::size_t>(stage)];
      StageProgress& state = progress[static_cast<std::size_t>(stage)];
      StageSimulation& result = simulation.stages[static_cast<std::size_t>(stage)];
      for (; state.next < actions.size(); ++state.next) {
        const PipelineAction& action = actions[state.next];
        double start = state.free_at;
        if (const std::optional<Sender> sender = sender_of(action, stage, stages)) {
          const std::optional<double> sent = end_of(sender->stage, sender->action);
          if (!sent) break;
          start = std::max(start, *sent + costs.latency);
        }
        const double time = duration[kind_index(action.kind)][static_cast<std::size_t>(stage)];
        result.timeline.push_back({action, start, start + time});
        result.busy += time;
        state.free_at = start + time;
        end_of(stage, action) = state.free_at;
        if (sends_message(action, stage, stages)) ++result.messages_sent;
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) fail_deadlock(actions_per_stage, progress);
  }

  double busy = 0.0;
  for (const StageProgress& stage : progress) simulation.makespan = std::max(simulation.makespan, stage.free_at);
  for (std::size_t stage = 0; stage < stage_count; ++stage) {
    StageSimulation& result = simulation.stages[stage];
    result.idle = simulation.makespan - result.busy;
    busy += result.busy;
    // Without Weight actions none wait.
    const auto& actions = actions_per_stage[stage];
    const bool weights_listed = lists_weights(actions);
    int held = 0, pending = 0;
    for (const PipelineAction& action : actions) {
      held += action.kind == Kind::Forward ? 1 : action.kind == Kind::Backward ? -1 : 0;
      result.peak_activations = std::max(result.peak_activations, held);
      if (!weights_listed) continue;
      pending += action.kind == Kind::Backward ? 1 : action.kind == Kind::Weight ? -1 : 0;
      result.peak_pending_weights = std::max(result.peak_pending_weights, pending);
    }
  }
  simulation.bubble_fraction = 1.0 - busy / (static_cast<double>(stages) * simulation.makespan);
  return simulation;
}

std::vector<std::vector<PipelineAction>> repeat_steps(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                                                      int steps) {
  DDL_CHECK(steps >= 1, "pipeline: steps must be at least 1, got {}", steps);
  DDL_CHECK(!actions_per_stage.empty(), "pipeline: no stages to repeat");
  const auto micro_batches =
      static_cast<int>(std::count_if(actions_per_stage[0].begin(), actions_per_stage[0].end(),
                                     [](const PipelineAction& action) { return action.kind == Kind::Forward; }));
  std::vector<std::vector<PipelineAction>> repeated(actions_per_stage.size());
  for (std::size_t stage = 0; stage < actions_per_stage.size(); ++stage) {
    for (int step = 0; step < steps; ++step) {
      for (const PipelineAction& action : actions_per_stage[stage]) {
        repeated[stage].push_back({action.kind, step * micro_batches + action.micro_batch});
      }
    }
  }
  return repeated;
}

double steady_step_time(const std::vector<std::vector<PipelineAction>>& actions_per_stage, const PipelineCosts& costs) {
  const double two = simulate_pipeline(repeat_steps(actions_per_stage, 2), costs).makespan;
  return simulate_pipeline(repeat_steps(actions_per_stage, 3), costs).makespan - two;
}

double textbook_bubble_fraction(int stages, int micro_batches) {
  check_pipeline_shape(stages, micro_batches);
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

std::string_view schedule_bubble_formula(PipelineSchedule schedule, int stages, int micro_batches) {
  switch (schedule) {
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB:
      return "(p-1)/(M+p-1)";
    case PipelineSchedule::ZeroBubbleH1:
      return micro_batches >= stages ? "(p-1)/(3M+p-1)" : "1-3M/(2M+2p-1)";
    case PipelineSchedule::ZeroBubbleH2:
      return micro_batches >= 2 * stages - 1 ? "0" : "1-3M/(2M+2p-1)";
  }
  return "unknown";
}

double schedule_bubble_fraction(PipelineSchedule schedule, int stages, int micro_batches) {
  if (schedule == PipelineSchedule::GPipe || schedule == PipelineSchedule::OneFOneB) {
    return textbook_bubble_fraction(stages, micro_batches);
  }
  check_pipeline_shape(stages, micro_batches);
  // In units of one F, B or W: the stage's work, and the round trip of one
  // micro-batch through every stage and back, with its last W.
  const double work = 3.0 * micro_batches;
  const double round_trip = 2.0 * micro_batches + 2.0 * stages - 1;
  const double fill = schedule == PipelineSchedule::ZeroBubbleH1 ? stages - 1 : 0;
  return 1.0 - work / std::max(work + fill, round_trip);
}

std::string render_timeline(const PipelineSimulation& simulation) {
  // Every cell is as wide as the longest label, so the columns line up.
  std::size_t width = 2;
  for (const StageSimulation& stage : simulation.stages) {
    for (const TimedPipelineAction& timed : stage.timeline) width = std::max(width, to_string(timed.action).size());
  }
  const auto whole_unit = [](double time) {
    DDL_CHECK(std::nearbyint(time) == time,
              "render_timeline: the chart has one cell per unit of time, but an action starts or ends at {}; "
              "scale the costs to whole units",
              time);
    return static_cast<std::size_t>(time);
  };
  const std::size_t columns = whole_unit(simulation.makespan);
  const std::size_t label_digits = fmt::formatted_size("{}", simulation.stages.size() - 1);
  const std::string idle_cell = std::string(width, '.') + '|';

  std::string chart;
  for (std::size_t stage = 0; stage < simulation.stages.size(); ++stage) {
    chart += fmt::format("stage {:<{}} |", stage, label_digits);
    std::size_t column = 0;
    for (const TimedPipelineAction& timed : simulation.stages[stage].timeline) {
      const std::size_t first = whole_unit(timed.start);
      const std::size_t last = whole_unit(timed.end);
      for (; column < first; ++column) chart += idle_cell;
      // An action of k units spans k cells and the k-1 separators between them.
      const std::size_t span = last - first;
      chart += fmt::format("{:<{}}|", to_string(timed.action), span * width + span - 1);
      column = last;
    }
    for (; column < columns; ++column) chart += idle_cell;
    chart += '\n';
  }
  return chart;
}

}  // namespace ddl::parallel
