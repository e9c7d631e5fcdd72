// The pipeline's schedules (GPipe, 1F1B and zero-bubble ones) as pure
// functions, and a simulator that runs every stage's action list at once on a
// model of time. A schedule's only way to deadlock is a cyclic wait in its
// action orders (every receive is posted early), so simulating all stages
// proves a schedule sound before any rank runs it, and measures its bubble
// and memory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddl::parallel {

// GPipe (Huang et al. 2019): every forward, then every backward.
// 1F1B (PipeDream-Flush, Narayanan et al. 2021): a few forwards, then one
// forward and one backward in turn, so a stage holds at most (stages - stage)
// micro-batches' activations instead of all of them.
// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): 1F1B's
// forwards and backwards, each backward for the inputs alone (B), and each
// micro-batch's weight gradients (W) a separate action that stage s holds
// back while at most s are pending: the W passes fill the time 1F1B's
// stages wait in the drain. With equal F, B and W times a step takes
// 3M + p - 1 units instead of 1F1B's 3M + 3(p - 1), at 1F1B's activations
// plus at most s micro-batches' weight-gradient rows (at most p in all).
// ZB-H2 (the same paper): twice 1F1B's warm-up, stage s starting with
// 2(p - s) - 1 forwards, so no stage waits for its first backward, and
// stage s holding back 2s weight gradients, so each stage ends s units
// after stage 0 as it began s units after it: a parallelogram. One step
// alone takes as long as ZB-H1's for M >= 2p - 2 (for fewer, up to two
// units longer), but back-to-back
// steps interlock, stage 0 starting the next while the last stage finishes
// its weight gradients: 3M units a step for M >= 2p - 1, no bubble at all,
// at up to 2p - 1 micro-batches' activations on stage 0.
//
// Two schedules give each rank several chunks of the model, cut into p·v
// stages for v chunks per rank, so each action is 1/v of a stage's and the
// fill and drain shrink with it:
// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM): rank r holds
// stages r, r + p, r + 2p, ... (looped), so every micro-batch goes v
// times round the ranks. The forwards go in rounds of p micro-batches,
// chunk 0's, then chunk 1's, ..., the backwards likewise from the last
// chunk, and rank r warms up with 2(p - r - 1) + (v - 1)p forwards before
// alternating: a bubble of (p - 1)/(vM + p - 1) for M a multiple of p, at
// that warm-up + 1 chunks' activations. Other M run the schedule of the
// next multiple of p without the missing micro-batches' actions (Megatron
// and torch refuse M not a multiple of p).
// ZB-V (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory"):
// two chunks per rank in a V, rank r holding stages r and 2p - 1 - r, so
// the turn at rank p - 1 is no message and the loss is computed on rank 0;
// each micro-batch's weight gradients an action of their own. Its lists
// come from running the ranks on the times they are given (unit times, or
// each chunk's measured ones: chunks of a real model differ, and lists
// made for equal chunks leave the longer ones' ranks waiting): whenever
// free, a rank takes
// the first of: the oldest micro-batch's ready backward, the oldest
// micro-batch's ready forward while it holds fewer than 2p chunks'
// activations (p micro-batches' worth: 1F1B's stage 0, on every rank;
// held from F until W, which reads them), its oldest pending weight
// gradients. 6M + p - 1 chunk units a step for M >= p + 2 on up to 4
// ranks (one or two more beyond): ZB-H1's bubble halved at 1F1B's peak
// activations.
enum class PipelineSchedule { GPipe, OneFOneB, ZeroBubbleH1, ZeroBubbleH2, Interleaved1F1B, ZeroBubbleV };

// "gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b" or "zb-v"; anything
// else is a ddl::Error listing the names.
PipelineSchedule parse_pipeline_schedule(std::string_view name);
std::string_view pipeline_schedule_name(PipelineSchedule schedule);
std::vector<PipelineSchedule> all_pipeline_schedules();

// Where a schedule puts a rank's chunks among the model's p·v stages:
// looped (chunk c of rank r is stage cp + r) or v_shape (stage cp + r for
// even c, cp + p - 1 - r for odd c).
enum class ChunkLayout { looped, v_shape };
ChunkLayout chunk_layout(PipelineSchedule schedule);
// The chunks of the model each rank holds under `schedule`: `chunks`, or
// when 0 the schedule's own (2 for interleaved 1F1B and ZB-V, 1 for the
// others). ddl::Error for fewer than 2 under interleaved 1F1B, other than 2
// under ZB-V, other than 1 under the others.
int chunks_per_rank(PipelineSchedule schedule, int chunks = 0);
// The model stage (0-based, of ranks · chunks) that `chunk` of `rank` holds,
// and the rank and chunk that hold model stage `stage`.
int model_stage(ChunkLayout layout, int rank, int chunk, int ranks);
struct ChunkHolder {
  int rank;
  int chunk;
};
ChunkHolder stage_holder(ChunkLayout layout, int stage, int ranks);

// One step of a stage's work on one micro-batch. Forward receives the input
// activation from the stage before (except on stage 0) and sends its output
// on (except on the last stage); Backward receives the output's gradient from
// the stage after (except on the last stage) and sends the input's gradient
// back (except on stage 0). Weight computes the micro-batch's weight
// gradients from what its Backward kept, on the stage alone (the B/W split
// of zero-bubble schedules, Qi et al. 2023): where a schedule lists no
// Weight, Backward computes them itself. A run of Weight actions in a row is
// one product per weight over those micro-batches' rows. Under a schedule
// of several chunks per rank, "stage" above is the chunk's model stage,
// and its neighbour may be on the same rank (ZB-V's turn): then nothing
// travels.
struct PipelineAction {
  enum class Kind { Forward, Backward, Weight };
  Kind kind;
  int micro_batch;
  int chunk = 0;  // which of the rank's chunks of the model

  bool operator==(const PipelineAction&) const = default;
};

// "F3", "B0", "W2"; with a chunk other than 0, "F3.1".
std::string to_string(const PipelineAction& action);

// Where a stage computes its weight gradients: inside each Backward (a
// list without Weight actions, as the textbook schedules are drawn; the
// runtime always lists them); as Weight actions of every micro-batch after
// the stage's last Backward (the batch's end: one product per weight over
// the whole batch, PipelineOptions::defer_weight_gradients); or as one
// Weight action per micro-batch where the schedule places it (GPipe and
// 1F1B: right after its Backward), each its own product added into the
// gradient in micro-batch order: the same bits under every schedule.
enum class WeightGradients { in_backward, at_batch_end, per_micro_batch };

// Whether `schedule` places each micro-batch's Weight itself (ZB-H1, ZB-H2,
// ZB-V):
// it takes WeightGradients::per_micro_batch alone.
bool places_weights(PipelineSchedule schedule);
// "each backward", "batch", "micro-batch".
std::string_view weight_gradients_name(WeightGradients weights);

// The simulator's model of time: how long one micro-batch's forward,
// backward and weight gradients take on each stage, and how long a message
// takes between ranks. A Backward of a list without Weight actions
// computes the weight gradients too: give it the time of both. With several
// chunks per rank, each chunk's action takes its rank's time, or its model
// stage's where the times are given per model stage (ranks x chunks of
// them, in model order).
struct PipelineCosts {
  double forward = 1.0;   // on every stage, unless forward_per_stage is given
  double backward = 1.0;  // on every stage, unless backward_per_stage is given
  double weight = 1.0;    // on every stage, unless weight_per_stage is given
  double latency = 0.0;   // from the end of the sending action to the earliest start of the receiving one
  std::vector<double> forward_per_stage{};   // empty, or one positive time per stage (rank or model stage)
  std::vector<double> backward_per_stage{};  // empty, or one positive time per stage (rank or model stage)
  std::vector<double> weight_per_stage{};    // empty, or one time >= 0 per stage (0: no weights)
  // Empty, or (one chunk per rank) the latency of each boundary, between
  // stages b and b + 1, both ways: a message's time grows with its size.
  std::vector<double> latency_per_boundary{};
};

// The ordered actions of `stage` (0-based) of `stages` for `micro_batches`
// micro-batches: each forward and each backward once, each micro-batch's
// forward before its backward, and (at_batch_end, per_micro_batch) each
// Weight once, after its backward. Every stages >= 1 and micro_batches >= 1
// works, micro_batches < stages included. ddl::Error for a schedule that
// places the weights given another WeightGradients. Under a schedule of
// several chunks per rank (chunks_per_rank(schedule, chunks)), a stage here
// is a rank, and its list holds each action of each of its chunks. ZB-V's
// lists come from running the ranks on `costs` (unit times by default);
// every other schedule's are fixed patterns that ignore them.
std::vector<PipelineAction> stage_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches,
                                          WeightGradients weights = WeightGradients::in_backward, int chunks = 0,
                                          const PipelineCosts& costs = {});
// stage_actions of every stage, indexed by stage: what simulate_pipeline takes.
std::vector<std::vector<PipelineAction>> pipeline_actions(PipelineSchedule schedule, int stages, int micro_batches,
                                                          WeightGradients weights = WeightGradients::in_backward,
                                                          int chunks = 0, const PipelineCosts& costs = {});

struct TimedPipelineAction {
  PipelineAction action;
  double start;
  double end;
};

struct StageSimulation {
  std::vector<TimedPipelineAction> timeline;  // the stage's actions in the order it ran them
  double busy = 0.0;                          // time spent computing
  double idle = 0.0;                          // makespan - busy: waiting, and done before the others
  int peak_activations = 0;                   // most micro-batches (chunks of them) held at once (F done, B not)
  int peak_pending_weights = 0;               // most whose weight gradients waited at once (backward done, W not)
  int messages_sent = 0;                      // activations sent on plus gradients sent back, to other ranks
};

struct PipelineSimulation {
  std::vector<StageSimulation> stages;
  int micro_batches = 0;
  int chunks = 1;                // of the model on each rank
  double makespan = 0.0;         // when the last action of any stage ends
  double bubble_fraction = 0.0;  // 1 - sum of busy / (stages * makespan): the share of stage time left idle
};

// Runs each stage's action list in order. An action starts when its stage is
// free and the action it needs has ended (plus the latency): F(s, m) needs
// F(s-1, m) and B(s, m) needs B(s+1, m); on every stage B(m) comes after
// F(m) in its list, which covers the last stage's B(m) needing its own F(m),
// and W(m) after B(m) (it needs nothing from another stage). The
// micro-batch count is the number of forwards on stage 0. Throws a
// ddl::Error naming the stage and action for an action out of range,
// repeated, missing (a stage lists a Weight for every micro-batch or for
// none), a backward listed before its forward or a weight before its
// backward; and on a deadlock, naming each stuck stage, the action it is at
// and what it waits for. Lists of several chunks per rank (the most any
// action names, + 1) are a model of ranks x chunks stages laid out by
// `layout`: every rank lists every chunk's actions, and an action waits
// for the neighbouring model stage's, with the latency only where that is
// on another rank.
PipelineSimulation simulate_pipeline(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                                     const PipelineCosts& costs = {}, ChunkLayout layout = ChunkLayout::looped);

// ZB-V's lists for `costs`, as stage_actions chooses them: those its
// greedy run orders by the costs where they stay within the activation
// limit and simulate shorter on the costs than the unit-time lists (a
// greedy rule is not optimal: on some times the unit lists are the
// faster), else the unit-time lists; with both simulated on the costs, for
// a set-up that reports the choice.
struct ZeroBubbleVChoice {
  std::vector<std::vector<PipelineAction>> actions;  // the lists kept, one per rank
  bool ordered_by_costs = false;                     // the greedy run's on the costs were kept
  PipelineSimulation kept;                           // the kept lists on the costs
  double unit_makespan = 0.0;                        // the unit-time lists on the costs
};
ZeroBubbleVChoice choose_zero_bubble_v(int ranks, int micro_batches, const PipelineCosts& costs);

// The lists of `steps` steps run back to back, as the runtime runs
// consecutive batches: each stage's list `steps` times, step k's
// micro-batches numbered from k * M, and no stage waiting for the others
// between steps (each goes on to its next step's actions as soon as its
// own are done). steps >= 1.
std::vector<std::vector<PipelineAction>> repeat_steps(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                                                      int steps);
// How long a step takes among back-to-back ones: the third's, from the
// second's end to its own (simulate_pipeline of repeat_steps). For every
// schedule here the steps repeat exactly from the second on; all but ZB-H2
// take as long as one step alone.
double steady_step_time(const std::vector<std::vector<PipelineAction>>& actions_per_stage,
                        const PipelineCosts& costs = {}, ChunkLayout layout = ChunkLayout::looped);

// The bubble of GPipe with equal stages and no latency, (p - 1) / (M + p - 1)
// for p stages and M micro-batches (Huang et al. 2019).
double textbook_bubble_fraction(int stages, int micro_batches);
// The share of stage time `schedule` leaves idle in back-to-back steps with
// equal stages, no latency and equal F, B and W times: GPipe's and 1F1B's
// above; ZB-H1's (p - 1) / (3M + p - 1) for M >= p (Qi et al. 2023: a
// bubble of (p - 1)(T_F + T_B - T_W) per stage), and for M < p one
// micro-batch's path through every stage and back bounds the step,
// 2p + 2M - 1 units: 1 - 3M / max(3M + p - 1, 2M + 2p - 1); ZB-H2's 0 for
// M >= 2p - 1, else the same path bounds the step: 1 - 3M / (2M + 2p - 1);
// interleaved 1F1B's (p - 1)/(vM + p - 1) for M a multiple of p (its
// paper's (p - 1)/(vM) of the busy time; F and B equal, W inside B); ZB-V's
// (p - 1)/(6M + p - 1) for M >= p + 2. Where no formula holds, the
// simulated fraction of the schedule's lists on unit times.
double schedule_bubble_fraction(PipelineSchedule schedule, int stages, int micro_batches, int chunks = 0);
// That fraction's formula as the reports print it: "(p-1)/(M+p-1)",
// "(p-1)/(3M+p-1)", "1-3M/(2M+2p-1)", "0", "(p-1)/(vM+p-1)",
// "(p-1)/(6M+p-1)", or "simulated".
std::string_view schedule_bubble_formula(PipelineSchedule schedule, int stages, int micro_batches, int chunks = 0);

// An ASCII Gantt chart, one row per stage and one cell per unit of time
// ("stage 0 |F0|F1|..|B0|"; ".." is idle; "F0.1": chunk 1's), for teaching. Every action must
// start and end on a whole unit, as with the default costs (a ddl::Error
// otherwise: scale the costs).
std::string render_timeline(const PipelineSimulation& simulation);

}  // namespace ddl::parallel
