// The pipeline's schedules as action lists, and the simulator that runs all
// stages' lists together (see pipeline_schedule.hpp).
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include <fmt/ranges.h>

#include <ddl/core/check.hpp>
#include <ddl/parallel/choice_by_name.hpp>

namespace ddl::parallel {

namespace {

using Kind = PipelineAction::Kind;

constexpr std::array kSchedules = {PipelineSchedule::GPipe,           PipelineSchedule::OneFOneB,
                                   PipelineSchedule::ZeroBubbleH1,    PipelineSchedule::ZeroBubbleH2,
                                   PipelineSchedule::Interleaved1F1B, PipelineSchedule::ZeroBubbleV};
// How many kinds of action there are: tables indexed by kind have this many rows.
constexpr std::size_t kKindCount = 3;

std::size_t kind_index(Kind kind) { return static_cast<std::size_t>(kind); }

char kind_letter(Kind kind) {
  switch (kind) {
    case Kind::Forward:
      return 'F';
    case Kind::Backward:
      return 'B';
    case Kind::Weight:
      return 'W';
  }
  return '?';
}

void check_pipeline_shape(int stages, int micro_batches) {
  DDL_CHECK(stages >= 1, "pipeline: stages must be at least 1, got {}", stages);
  DDL_CHECK(micro_batches >= 1, "pipeline: micro_batches must be at least 1, got {}", micro_batches);
}

// The model's stages on the ranks: `chunks` per rank, laid out by `layout`.
struct Placement {
  int ranks = 1;
  int chunks = 1;
  ChunkLayout layout = ChunkLayout::looped;

  int stages() const { return ranks * chunks; }
  int stage_of(int rank, int chunk) const { return model_stage(layout, rank, chunk, ranks); }
  ChunkHolder holder_of(int stage) const { return stage_holder(layout, stage, ranks); }
};

// An action on a rank (possibly the same one), whose output an action takes.
struct Sender {
  int stage;  // the rank
  PipelineAction action;
};

// Where `action` on `rank` takes its input from: the same micro-batch's
// forward on the model stage before, or its backward on the model stage
// after. The ends of the model take nothing (the first stage reads the
// batch, the last computes the loss).
std::optional<Sender> sender_of(const PipelineAction& action, int rank, const Placement& placement) {
  const int stage = placement.stage_of(rank, action.chunk);
  const auto from = [&](int neighbour) {
    const ChunkHolder holder = placement.holder_of(neighbour);
    return Sender{holder.rank, {action.kind, action.micro_batch, holder.chunk}};
  };
  switch (action.kind) {
    case Kind::Forward:
      if (stage == 0) return std::nullopt;
      return from(stage - 1);
    case Kind::Backward:
      if (stage == placement.stages() - 1) return std::nullopt;
      return from(stage + 1);
    case Kind::Weight:
      return std::nullopt;  // the stage's own rows
  }
  return std::nullopt;
}

// Whether `action` sends a message to another rank: its output to the next
// model stage or its input's gradient to the one before, unless that is
// on the same rank (ZB-V's turn) or there is none.
bool sends_message(const PipelineAction& action, int rank, const Placement& placement) {
  const int stage = placement.stage_of(rank, action.chunk);
  int to = -1;
  if (action.kind == Kind::Forward && stage < placement.stages() - 1) to = stage + 1;
  if (action.kind == Kind::Backward && stage > 0) to = stage - 1;
  return to >= 0 && placement.holder_of(to).rank != rank;
}

// The micro-batches a list runs: its forwards of chunk 0.
int forwards_of_chunk_0(const std::vector<PipelineAction>& actions) {
  return static_cast<int>(std::count_if(actions.begin(), actions.end(), [](const PipelineAction& action) {
    return action.kind == Kind::Forward && action.chunk == 0;
  }));
}

// Whether a stage's list has Weight actions: without them each Backward
// computes its weight gradients.
bool lists_weights(const std::vector<PipelineAction>& actions) {
  return std::any_of(actions.begin(), actions.end(),
                     [](const PipelineAction& action) { return action.kind == Kind::Weight; });
}

// Each stage lists every micro-batch's forward and backward exactly once
// (of each of its chunks), the forward first (its activations are what the
// backward consumes), and a weight for every micro-batch or for none, each
// after its backward (the rows it computes from are what the backward
// kept).
void check_actions(const std::vector<std::vector<PipelineAction>>& actions_per_stage, int micro_batches, int chunks) {
  const auto slot = [&](const PipelineAction& action) {
    return static_cast<std::size_t>(action.chunk) * static_cast<std::size_t>(micro_batches) +
           static_cast<std::size_t>(action.micro_batch);
  };
  const std::string_view per_chunk = chunks > 1 ? " per chunk" : "";
  for (std::size_t stage = 0; stage < actions_per_stage.size(); ++stage) {
    const std::vector<PipelineAction>& actions = actions_per_stage[stage];
    // position_of[kind][slot]: where the stage lists that action; -1 where it does not.
    std::array<std::vector<int>, kKindCount> position_of;
    position_of.fill(std::vector<int>(static_cast<std::size_t>(micro_batches) * static_cast<std::size_t>(chunks), -1));
    for (std::size_t position = 0; position < actions.size(); ++position) {
      const PipelineAction& action = actions[position];
      const bool in_range = action.micro_batch >= 0 && action.micro_batch < micro_batches;
      DDL_CHECK(in_range,
                "pipeline: stage {} lists {} at position {}, but the micro-batches are 0..{} (stage 0 runs {} "
                "forwards{})",
                stage, to_string(action), position, micro_batches - 1, micro_batches, per_chunk);
      DDL_CHECK(action.chunk >= 0, "pipeline: stage {} lists {} at position {}, of chunk {}", stage, to_string(action),
                position, action.chunk);
      int& listed_at = position_of[kind_index(action.kind)][slot(action)];
      DDL_CHECK(listed_at < 0, "pipeline: stage {} lists {} twice, at positions {} and {}", stage, to_string(action),
                listed_at, position);
      listed_at = static_cast<int>(position);
      const PipelineAction forward{Kind::Forward, action.micro_batch, action.chunk};
      const PipelineAction backward{Kind::Backward, action.micro_batch, action.chunk};
      DDL_CHECK(action.kind != Kind::Backward || position_of[kind_index(Kind::Forward)][slot(action)] >= 0,
                "pipeline: stage {} lists {} at position {} before {}: a backward needs its forward's activations",
                stage, to_string(action), position, to_string(forward));
      DDL_CHECK(action.kind != Kind::Weight || position_of[kind_index(Kind::Backward)][slot(action)] >= 0,
                "pipeline: stage {} lists {} at position {} before {}: a weight gradient needs what its backward "
                "kept",
                stage, to_string(action), position, to_string(backward));
    }
    const bool weights_listed = lists_weights(actions);
    for (const Kind kind : {Kind::Forward, Kind::Backward, Kind::Weight}) {
      if (kind == Kind::Weight && !weights_listed) continue;
      for (int chunk = 0; chunk < chunks; ++chunk) {
        for (int micro_batch = 0; micro_batch < micro_batches; ++micro_batch) {
          const PipelineAction action{kind, micro_batch, chunk};
          DDL_CHECK(position_of[kind_index(kind)][slot(action)] >= 0,
                    "pipeline: stage {} never runs {} (there are {} micro-batches{})", stage, to_string(action),
                    micro_batches, chunks > 1 ? fmt::format(" and {} chunks per rank", chunks) : "");
        }
      }
    }
  }
}

// One time per model stage: the given ones (one per rank, or with several
// chunks per rank one per model stage), or `uniform` on every stage.
// `may_be_zero`: a weight-gradient action of a stage without weights to
// differentiate takes no time; a forward or backward always does.
std::vector<double> times_per_stage(const std::vector<double>& given, double uniform, const Placement& placement,
                                    std::string_view what, bool may_be_zero = false) {
  const auto ranks = static_cast<std::size_t>(placement.ranks);
  const auto stages = static_cast<std::size_t>(placement.stages());
  DDL_CHECK(given.empty() || given.size() == ranks || given.size() == stages,
            "pipeline: {} {} times for {} ranks of {} chunk(s), expected one per rank or one per model stage",
            given.size(), what, ranks, placement.chunks);
  std::vector<double> times(stages, uniform);
  for (std::size_t stage = 0; stage < stages; ++stage) {
    if (given.size() == stages) {
      times[stage] = given[stage];
    } else if (!given.empty()) {
      times[stage] = given[static_cast<std::size_t>(placement.holder_of(static_cast<int>(stage)).rank)];
    }
    DDL_CHECK(std::isfinite(times[stage]) && (times[stage] > 0.0 || (may_be_zero && times[stage] == 0.0)),
              "pipeline: the {} time of stage {} must be {}, got {}", what, stage,
              may_be_zero ? "at least 0" : "positive", times[stage]);
  }
  return times;
}

// Each kind of action's time on each model stage (times_per_stage).
std::array<std::vector<double>, kKindCount> durations(const PipelineCosts& costs, const Placement& placement) {
  std::array<std::vector<double>, kKindCount> duration;
  duration[kind_index(Kind::Forward)] = times_per_stage(costs.forward_per_stage, costs.forward, placement, "forward");
  duration[kind_index(Kind::Backward)] =
      times_per_stage(costs.backward_per_stage, costs.backward, placement, "backward");
  duration[kind_index(Kind::Weight)] = times_per_stage(costs.weight_per_stage, costs.weight, placement, "weight", true);
  return duration;
}

// A stage as the simulation runs it.
struct StageProgress {
  std::size_t next = 0;  // the position of its next action
  double free_at = 0.0;  // when its last action ended
  // end_of[kind][chunk * M + m]: when that action ended on this stage; empty until it has.
  std::array<std::vector<std::optional<double>>, kKindCount> end_of;
};

[[noreturn]] void fail_deadlock(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                                const std::vector<StageProgress>& progress, const Placement& placement) {
  const int stages = static_cast<int>(actions_per_stage.size());
  std::vector<std::string> stuck;
  for (int stage = 0; stage < stages; ++stage) {
    const auto& actions = actions_per_stage[static_cast<std::size_t>(stage)];
    const std::size_t next = progress[static_cast<std::size_t>(stage)].next;
    if (next == actions.size()) continue;
    // An action that receives nothing can always run, so a stuck one has a sender.
    const Sender sender = *sender_of(actions[next], stage, placement);
    stuck.push_back(fmt::format("stage {} is at {} (position {}), waiting for {} from stage {}", stage,
                                to_string(actions[next]), next, to_string(sender.action), sender.stage));
  }
  detail::fail("pipeline: deadlock, no stage can go on: {}", fmt::join(stuck, "; "));
}

// Interleaved 1F1B's list for `rank` (see pipeline_schedule.hpp). For M not
// a multiple of p the lists of the next multiple, without the actions of
// the micro-batches beyond M: a subset of a deadlock-free set of lists,
// in the same orders, cannot wait in a cycle either.
std::vector<PipelineAction> interleaved_actions(int rank, int ranks, int micro_batches, int chunks,
                                                WeightGradients weights) {
  const int rounds = (micro_batches + ranks - 1) / ranks;
  const int padded = rounds * ranks;
  // The k-th forward (backward) of the rank: round k / (v p) of p
  // micro-batches, chunk k / p % v of it (from the last, backward), and
  // the (k % p)-th micro-batch of the round.
  const auto nth = [&](Kind kind, int k) {
    const int round = k / (chunks * ranks), chunk = k / ranks % chunks;
    return PipelineAction{kind, round * ranks + k % ranks, kind == Kind::Forward ? chunk : chunks - 1 - chunk};
  };
  const int total = chunks * padded;
  const int warm_up = std::min(total, 2 * (ranks - rank - 1) + (chunks - 1) * ranks);
  std::vector<PipelineAction> actions;
  std::vector<PipelineAction> pending_weights;
  const auto add = [&](const PipelineAction& action) {
    if (action.micro_batch < micro_batches) actions.push_back(action);
  };
  const auto backward = [&](int k) {
    const PipelineAction action = nth(Kind::Backward, k);
    add(action);
    const PipelineAction weight{Kind::Weight, action.micro_batch, action.chunk};
    if (weights == WeightGradients::per_micro_batch) add(weight);
    if (weights == WeightGradients::at_batch_end) pending_weights.push_back(weight);
  };
  int forwards = 0, backwards = 0;
  while (forwards < warm_up) add(nth(Kind::Forward, forwards++));
  while (forwards < total) {
    add(nth(Kind::Forward, forwards++));
    backward(backwards++);
  }
  while (backwards < total) backward(backwards++);
  for (const PipelineAction& weight : pending_weights) add(weight);
  return actions;
}

// ZB-V's lists for every rank (see pipeline_schedule.hpp): the ranks run
// on the costs' times (unit times by default; measured ones, per model
// stage, when the chunks differ), each rank, whenever it is free, taking
// the first of its ready backward, forward (under the activation limit)
// and pending weight gradients, or else waiting for the next action to end
// anywhere. A chunk-micro-batch counts against the limit from its F until
// its W, not its B: its W reads the activations the F kept (a Dense
// layer's input), so a limit counted to B let the W's wait for the batch's
// end and their rows grow with M (on wide_mlp at M = 16, 1.7x the
// activations). Each chunk's forwards and backwards go in micro-batch
// order (so each weight's gradient sums its micro-batches in order, as
// under every schedule); of two ready, the older micro-batch's, chunk 1's
// on a tie (it is nearer the loss on the way down, nearer the end on the
// way back). The same costs give the same lists on every rank: only
// sums and comparisons of the same doubles decide.
struct GreedyLists {
  std::vector<std::vector<PipelineAction>> actions;
  bool over_limit = false;  // a chunk-1 forward went over the limit
};

GreedyLists greedy_v_lists(int ranks, int micro_batches, const PipelineCosts& costs) {
  const Placement placement{ranks, 2, ChunkLayout::v_shape};
  const int stages = placement.stages();
  const std::array<std::vector<double>, kKindCount> duration = durations(costs, placement);
  DDL_CHECK(std::isfinite(costs.latency) && costs.latency >= 0.0, "pipeline: latency must be at least 0, got {}",
            costs.latency);
  const int limit = 2 * ranks;  // chunk-micro-batches: 1F1B's stage 0 holds p micro-batches of two chunks
  // When each model stage's forward and backward of each micro-batch ended.
  const auto never = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> forward_end(static_cast<std::size_t>(stages),
                                               std::vector<double>(static_cast<std::size_t>(micro_batches), never));
  std::vector<std::vector<double>> backward_end = forward_end;
  struct Rank {
    std::array<int, 2> forwards{}, backwards{};  // per chunk: how many are done
    int held = 0;
    std::deque<PipelineAction> pending_weights;
    double free_at = 0.0;
  };
  std::vector<Rank> state(static_cast<std::size_t>(ranks));
  std::vector<std::vector<PipelineAction>> actions(static_cast<std::size_t>(ranks));
  // When something may become ready: an action's end, and its message's arrival.
  std::set<double> events{0.0};
  const std::size_t total = 6 * static_cast<std::size_t>(micro_batches);
  bool overdraw = false, over_limit = false;
  for (double time = 0.0;;) {
    bool done = true, acted = false;
    for (int rank = 0; rank < ranks; ++rank) {
      Rank& r = state[static_cast<std::size_t>(rank)];
      std::vector<PipelineAction>& list = actions[static_cast<std::size_t>(rank)];
      if (list.size() == total) continue;
      done = false;
      if (r.free_at > time) continue;
      // The next forward or backward of `chunk`, if its input is there.
      const auto ready = [&](Kind kind, int chunk) -> std::optional<PipelineAction> {
        const auto c = static_cast<std::size_t>(chunk);
        const int m = kind == Kind::Forward ? r.forwards[c] : r.backwards[c];
        if (m == micro_batches || (kind == Kind::Backward && m == r.forwards[c])) return std::nullopt;
        const int stage = placement.stage_of(rank, chunk);
        const int from = kind == Kind::Forward ? stage - 1 : stage + 1;
        if (from >= 0 && from < stages) {
          const auto& ends = kind == Kind::Forward ? forward_end : backward_end;
          const double latency = placement.holder_of(from).rank == rank ? 0.0 : costs.latency;
          if (ends[static_cast<std::size_t>(from)][static_cast<std::size_t>(m)] + latency > time) return std::nullopt;
        }
        return PipelineAction{kind, m, chunk};
      };
      const auto older = [](const std::optional<PipelineAction>& a, const std::optional<PipelineAction>& b) {
        if (!a) return b;
        if (!b) return a;
        return b->micro_batch < a->micro_batch ? b : a;  // a is chunk 1's: it wins a tie
      };
      std::optional<PipelineAction> next = older(ready(Kind::Backward, 1), ready(Kind::Backward, 0));
      if (!next) {
        const bool room = r.held + static_cast<int>(r.pending_weights.size()) < limit;
        next = room ? older(ready(Kind::Forward, 1), ready(Kind::Forward, 0))
                    : (overdraw ? ready(Kind::Forward, 1) : std::nullopt);
      }
      if (!next && !r.pending_weights.empty()) {
        next = r.pending_weights.front();
        r.pending_weights.pop_front();
      }
      if (!next) continue;
      const auto chunk = static_cast<std::size_t>(next->chunk);
      const int stage = placement.stage_of(rank, next->chunk);
      const auto mb = static_cast<std::size_t>(next->micro_batch);
      r.free_at = time + duration[kind_index(next->kind)][static_cast<std::size_t>(stage)];
      events.insert(r.free_at);
      events.insert(r.free_at + costs.latency);
      if (next->kind == Kind::Forward) {
        forward_end[static_cast<std::size_t>(stage)][mb] = r.free_at;
        ++r.forwards[chunk];
        ++r.held;
      } else if (next->kind == Kind::Backward) {
        backward_end[static_cast<std::size_t>(stage)][mb] = r.free_at;
        ++r.backwards[chunk];
        --r.held;
        r.pending_weights.push_back({Kind::Weight, next->micro_batch, next->chunk});
      }
      list.push_back(*next);
      acted = true;
    }
    if (done) return {actions, over_limit};
    if (acted) {
      overdraw = false;
      continue;  // what ran may free a rank at once (a weight gradient of no time)
    }
    // Nothing changes before the next action ends or its message arrives.
    // With none to come, the limit holds every rank back: on times where
    // chunk 0 runs ahead, rank 0 can fill it with chunk 0's forwards and
    // then wait for the backward that its chunk-1 forward leads to. A
    // chunk-1 forward takes a micro-batch already in the pipeline on
    // towards its backward, so it may then go over the limit (never on
    // unit times).
    const auto later = events.upper_bound(time);
    if (later == events.end()) {
      DDL_CHECK(!overdraw, "pipeline: zb-v's lists for {} ranks and {} micro-batches got stuck at time {}", ranks,
                micro_batches, time);
      overdraw = over_limit = true;
      continue;
    }
    time = *later;
  }
}

// ZB-V's lists: on unit times the greedy run's, else choose_zero_bubble_v's.
std::vector<std::vector<PipelineAction>> zero_bubble_v_actions(int ranks, int micro_batches,
                                                               const PipelineCosts& costs) {
  const bool unit_times = costs.forward_per_stage.empty() && costs.backward_per_stage.empty() &&
                          costs.weight_per_stage.empty() && costs.latency == 0.0;
  if (unit_times) return greedy_v_lists(ranks, micro_batches, {}).actions;
  return choose_zero_bubble_v(ranks, micro_batches, costs).actions;
}

}  // namespace

PipelineSchedule parse_pipeline_schedule(std::string_view name) {
  return choice_by_name(name, kSchedules, pipeline_schedule_name, "pipeline schedule");
}

std::vector<PipelineSchedule> all_pipeline_schedules() { return {kSchedules.begin(), kSchedules.end()}; }

std::string_view pipeline_schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::GPipe:
      return "gpipe";
    case PipelineSchedule::OneFOneB:
      return "1f1b";
    case PipelineSchedule::ZeroBubbleH1:
      return "zb-h1";
    case PipelineSchedule::ZeroBubbleH2:
      return "zb-h2";
    case PipelineSchedule::Interleaved1F1B:
      return "interleaved-1f1b";
    case PipelineSchedule::ZeroBubbleV:
      return "zb-v";
  }
  return "unknown";
}

ChunkLayout chunk_layout(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::ZeroBubbleV ? ChunkLayout::v_shape : ChunkLayout::looped;
}

int chunks_per_rank(PipelineSchedule schedule, int chunks) {
  DDL_CHECK(chunks >= 0, "pipeline: chunks per rank must be at least 1 (or 0 for the schedule's), got {}", chunks);
  switch (schedule) {
    case PipelineSchedule::Interleaved1F1B:
      DDL_CHECK(chunks != 1,
                "pipeline: the interleaved-1f1b schedule needs at least 2 chunks of the model per rank, got 1 "
                "(that is 1f1b)");
      return chunks == 0 ? 2 : chunks;
    case PipelineSchedule::ZeroBubbleV:
      DDL_CHECK(chunks == 0 || chunks == 2, "pipeline: the zb-v schedule holds 2 chunks of the model per rank, got {}",
                chunks);
      return 2;
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB:
    case PipelineSchedule::ZeroBubbleH1:
    case PipelineSchedule::ZeroBubbleH2:
      DDL_CHECK(chunks <= 1,
                "pipeline: the {} schedule holds 1 chunk of the model per rank, got {} (interleaved-1f1b and zb-v "
                "hold several)",
                pipeline_schedule_name(schedule), chunks);
      return 1;
  }
  return 1;
}

// A V's odd chunks run back from the last rank to the first.
int model_stage(ChunkLayout layout, int rank, int chunk, int ranks) {
  const bool reversed = layout == ChunkLayout::v_shape && chunk % 2 == 1;
  return chunk * ranks + (reversed ? ranks - 1 - rank : rank);
}

ChunkHolder stage_holder(ChunkLayout layout, int stage, int ranks) {
  const int chunk = stage / ranks, position = stage % ranks;
  const bool reversed = layout == ChunkLayout::v_shape && chunk % 2 == 1;
  return {reversed ? ranks - 1 - position : position, chunk};
}

bool places_weights(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::ZeroBubbleH1 || schedule == PipelineSchedule::ZeroBubbleH2 ||
         schedule == PipelineSchedule::ZeroBubbleV;
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
  if (action.chunk != 0) return fmt::format("{}{}.{}", kind_letter(action.kind), action.micro_batch, action.chunk);
  return fmt::format("{}{}", kind_letter(action.kind), action.micro_batch);
}

namespace {

// GPipe's, 1F1B's, ZB-H1's and ZB-H2's list for `stage`.
std::vector<PipelineAction> one_chunk_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches,
                                              WeightGradients weights) {
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
  if (schedule == PipelineSchedule::GPipe) {
    while (forwards < micro_batches) forward();
    while (backwards < micro_batches) backward(held);
  } else {
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
  }
  if (weights != WeightGradients::in_backward) {
    while (weights_done < micro_batches) actions.push_back({Kind::Weight, weights_done++});
  }
  return actions;
}

void check_schedule_arguments(PipelineSchedule schedule, int stages, int micro_batches, WeightGradients weights) {
  check_pipeline_shape(stages, micro_batches);
  DDL_CHECK(!places_weights(schedule) || weights == WeightGradients::per_micro_batch,
            "pipeline: the {} schedule places each micro-batch's weight gradients itself; it takes them per "
            "micro-batch",
            pipeline_schedule_name(schedule));
}

}  // namespace

std::vector<PipelineAction> stage_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches,
                                          WeightGradients weights, int chunks, const PipelineCosts& costs) {
  check_schedule_arguments(schedule, stages, micro_batches, weights);
  DDL_CHECK(stage >= 0 && stage < stages, "pipeline: stage {} is out of range for {} stages (0..{})", stage, stages,
            stages - 1);
  chunks = chunks_per_rank(schedule, chunks);
  switch (schedule) {
    case PipelineSchedule::Interleaved1F1B:
      return interleaved_actions(stage, stages, micro_batches, chunks, weights);
    case PipelineSchedule::ZeroBubbleV:
      return zero_bubble_v_actions(stages, micro_batches, costs)[static_cast<std::size_t>(stage)];
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB:
    case PipelineSchedule::ZeroBubbleH1:
    case PipelineSchedule::ZeroBubbleH2:
      break;
  }
  return one_chunk_actions(schedule, stage, stages, micro_batches, weights);
}

ZeroBubbleVChoice choose_zero_bubble_v(int ranks, int micro_batches, const PipelineCosts& costs) {
  check_schedule_arguments(PipelineSchedule::ZeroBubbleV, ranks, micro_batches, WeightGradients::per_micro_batch);
  GreedyLists unit = greedy_v_lists(ranks, micro_batches, {});
  PipelineSimulation on_unit = simulate_pipeline(unit.actions, costs, ChunkLayout::v_shape);
  ZeroBubbleVChoice choice{.unit_makespan = on_unit.makespan};
  GreedyLists timed = greedy_v_lists(ranks, micro_batches, costs);
  if (!timed.over_limit) {
    PipelineSimulation on_timed = simulate_pipeline(timed.actions, costs, ChunkLayout::v_shape);
    if (on_timed.makespan < on_unit.makespan) {
      choice.actions = std::move(timed.actions);
      choice.ordered_by_costs = true;
      choice.kept = std::move(on_timed);
      return choice;
    }
  }
  choice.actions = std::move(unit.actions);
  choice.kept = std::move(on_unit);
  return choice;
}

std::vector<std::vector<PipelineAction>> pipeline_actions(PipelineSchedule schedule, int stages, int micro_batches,
                                                          WeightGradients weights, int chunks,
                                                          const PipelineCosts& costs) {
  check_schedule_arguments(schedule, stages, micro_batches, weights);
  chunks_per_rank(schedule, chunks);
  if (schedule == PipelineSchedule::ZeroBubbleV) return zero_bubble_v_actions(stages, micro_batches, costs);
  std::vector<std::vector<PipelineAction>> actions;
  for (int stage = 0; stage < stages; ++stage) {
    actions.push_back(stage_actions(schedule, stage, stages, micro_batches, weights, chunks, costs));
  }
  return actions;
}

PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                                     const PipelineCosts& costs, ChunkLayout layout) {
  DDL_CHECK(!actions_per_stage.empty(), "pipeline: no stages to simulate");
  const std::size_t stage_count = actions_per_stage.size();
  const int stages = static_cast<int>(stage_count);
  const int micro_batches = forwards_of_chunk_0(actions_per_stage[0]);
  DDL_CHECK(micro_batches >= 1, "pipeline: stage 0 runs no forward, so there is no micro-batch to simulate");
  int chunks = 1;
  for (const auto& actions : actions_per_stage) {
    for (const PipelineAction& action : actions) chunks = std::max(chunks, action.chunk + 1);
  }
  const Placement placement{stages, chunks, layout};
  check_actions(actions_per_stage, micro_batches, chunks);
  const std::array<std::vector<double>, kKindCount> duration = durations(costs, placement);
  DDL_CHECK(std::isfinite(costs.latency) && costs.latency >= 0.0, "pipeline: latency must be at least 0, got {}",
            costs.latency);
  DDL_CHECK(costs.latency_per_boundary.empty() || (chunks == 1 && costs.latency_per_boundary.size() == stage_count - 1),
            "pipeline: {} latencies per boundary for {} stages of {} chunk(s) each; give one per boundary between "
            "stages (stages - 1), and only with one chunk per rank",
            costs.latency_per_boundary.size(), stages, chunks);
  for (std::size_t b = 0; b < costs.latency_per_boundary.size(); ++b) {
    const double latency = costs.latency_per_boundary[b];
    DDL_CHECK(std::isfinite(latency) && latency >= 0.0,
              "pipeline: the latency between stages {} and {} must be at least 0, got {}", b, b + 1, latency);
  }
  // What a message between two ranks takes: the boundary's own, or the one latency.
  const auto latency_between = [&](int a, int b) {
    if (a == b) return 0.0;
    return costs.latency_per_boundary.empty() ? costs.latency
                                              : costs.latency_per_boundary[static_cast<std::size_t>(std::min(a, b))];
  };

  PipelineSimulation simulation;
  simulation.micro_batches = micro_batches;
  simulation.chunks = chunks;
  simulation.stages.resize(stage_count);
  std::vector<StageProgress> progress(stage_count);
  for (StageProgress& stage : progress) {
    stage.end_of.fill(
        std::vector<std::optional<double>>(static_cast<std::size_t>(micro_batches) * static_cast<std::size_t>(chunks)));
  }
  const auto end_of = [&](int stage, const PipelineAction& action) -> std::optional<double>& {
    return progress[static_cast<std::size_t>(stage)]
        .end_of[kind_index(action.kind)][static_cast<std::size_t>(action.chunk * micro_batches + action.micro_batch)];
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
        if (const std::optional<Sender> sender = sender_of(action, stage, placement)) {
          const std::optional<double> sent = end_of(sender->stage, sender->action);
          if (!sent) break;
          start = std::max(start, *sent + latency_between(sender->stage, stage));
        }
        const double time =
            duration[kind_index(action.kind)][static_cast<std::size_t>(placement.stage_of(stage, action.chunk))];
        result.timeline.push_back({action, start, start + time});
        result.busy += time;
        state.free_at = start + time;
        end_of(stage, action) = state.free_at;
        if (sends_message(action, stage, placement)) ++result.messages_sent;
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) fail_deadlock(actions_per_stage, progress, placement);
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
  const int micro_batches = forwards_of_chunk_0(actions_per_stage[0]);
  std::vector<std::vector<PipelineAction>> repeated(actions_per_stage.size());
  for (std::size_t stage = 0; stage < actions_per_stage.size(); ++stage) {
    for (int step = 0; step < steps; ++step) {
      for (const PipelineAction& action : actions_per_stage[stage]) {
        repeated[stage].push_back({action.kind, step * micro_batches + action.micro_batch, action.chunk});
      }
    }
  }
  return repeated;
}

double steady_step_time(const std::vector<std::vector<PipelineAction>>& actions_per_stage, const PipelineCosts& costs,
                        ChunkLayout layout) {
  const double two = simulate_pipeline(repeat_steps(actions_per_stage, 2), costs, layout).makespan;
  return simulate_pipeline(repeat_steps(actions_per_stage, 3), costs, layout).makespan - two;
}

double textbook_bubble_fraction(int stages, int micro_batches) {
  check_pipeline_shape(stages, micro_batches);
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

namespace {

// Whether `schedule_bubble_fraction` has a closed form for these counts.
bool has_formula(PipelineSchedule schedule, int stages, int micro_batches) {
  switch (schedule) {
    case PipelineSchedule::Interleaved1F1B:
      return micro_batches % stages == 0;
    case PipelineSchedule::ZeroBubbleV:
      // Beyond 4 ranks its lists (ddl's greedy rule) take one or two
      // units more than the paper's 6M + p - 1: simulated.
      return micro_batches >= stages + 2 && stages <= 4;
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB:
    case PipelineSchedule::ZeroBubbleH1:
    case PipelineSchedule::ZeroBubbleH2:
      return true;
  }
  return true;
}

}  // namespace

std::string_view schedule_bubble_formula(PipelineSchedule schedule, int stages, int micro_batches, int chunks) {
  chunks_per_rank(schedule, chunks);
  if (!has_formula(schedule, stages, micro_batches)) return "simulated";
  switch (schedule) {
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB:
      return "(p-1)/(M+p-1)";
    case PipelineSchedule::ZeroBubbleH1:
      return micro_batches >= stages ? "(p-1)/(3M+p-1)" : "1-3M/(2M+2p-1)";
    case PipelineSchedule::ZeroBubbleH2:
      return micro_batches >= 2 * stages - 1 ? "0" : "1-3M/(2M+2p-1)";
    case PipelineSchedule::Interleaved1F1B:
      return "(p-1)/(vM+p-1)";
    case PipelineSchedule::ZeroBubbleV:
      return "(p-1)/(6M+p-1)";
  }
  return "unknown";
}

double schedule_bubble_fraction(PipelineSchedule schedule, int stages, int micro_batches, int chunks) {
  check_pipeline_shape(stages, micro_batches);
  chunks = chunks_per_rank(schedule, chunks);
  const double p = stages, m = micro_batches;
  if (!has_formula(schedule, stages, micro_batches)) {
    const WeightGradients weights =
        places_weights(schedule) ? WeightGradients::per_micro_batch : WeightGradients::in_backward;
    return simulate_pipeline(pipeline_actions(schedule, stages, micro_batches, weights, chunks), {},
                             chunk_layout(schedule))
        .bubble_fraction;
  }
  // In units of one F, B or W: the stage's work, and the round trip of one
  // micro-batch through every stage and back, with its last W.
  const double work = 3.0 * m;
  const double round_trip = 2.0 * m + 2.0 * p - 1;
  switch (schedule) {
    case PipelineSchedule::GPipe:
    case PipelineSchedule::OneFOneB:
      return textbook_bubble_fraction(stages, micro_batches);
    case PipelineSchedule::ZeroBubbleH1:
      return 1.0 - work / std::max(work + p - 1, round_trip);
    case PipelineSchedule::ZeroBubbleH2:
      return 1.0 - work / std::max(work, round_trip);
    case PipelineSchedule::Interleaved1F1B:
      return (p - 1) / (chunks * m + p - 1);
    case PipelineSchedule::ZeroBubbleV:
      return (p - 1) / (6.0 * m + p - 1);
  }
  return 0.0;
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
