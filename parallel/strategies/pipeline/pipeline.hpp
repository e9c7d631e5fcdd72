// Pipeline: pipeline parallelism across ranks as a strategy for the Trainer
// (GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2021). A Sequential is
// cut into contiguous stages, one per rank of the communicator; each rank
// builds and holds only its stage's layers, their gradients and their
// optimizer state, so a model too big for one process fits several.
//
// Each batch is cut into M micro-batches. A stage runs its schedule's list of
// actions (pipeline_schedule.hpp): a forward takes the micro-batch's input
// activation from the stage before (stage 0 slices the batch) and sends its
// output on; a backward takes the output's gradient from the stage after
// (the last stage starts it from the micro-batch's loss) and sends the input's
// gradient back. Every receive of a step is posted before its first action,
// and sends do not wait, so no schedule can deadlock, M < stages included.
// Each micro-batch's loss counts with its share of the batch, and the
// optimizer steps once per batch: the result equals the unsplit batch's.
//
// Every stage reads every batch (the first needs its inputs, the last its
// targets). The last stage computes the loss and sends the batch's output
// and loss to rank 0, which reports them: progress, metrics, predictions
// and checkpoints behave as in one process. Checkpoints are one file in the
// single-process format, gathered from the stages (gather_state), and every
// stage takes its part of one when resuming (select_state), so a run may
// resume on another stage count or in one process.
//
// Hybrid parallelism: a ProcessGrid splits the ranks into dp pipelines of
// pp stages. Each pipeline reads its shard of every epoch (as data
// parallelism's ranks do), and each stage's gradients are averaged over the
// same stage of every pipeline by a DataParallel over them: its gradient
// buckets (views that backward accumulates into), sent as they fill during
// the stage's last backward and weight gradients, on the GPU over NCCL
// where DataParallel would, with any of our allreduce algorithms; so all
// pipelines step alike. The grid's third axis splits each stage's layers
// over a tensor group (tensor_plan.hpp): the group's ranks run the same
// schedule on their slices, each sending its (replicated) boundary
// activation to the same tensor rank of the next stage, and the stages cut
// only where the plan's activations are replicated.
//
// A Dense weight's gradient is computed once per batch, after the last
// micro-batch's backward, from the rows every micro-batch kept (its input
// and output gradient): the input gradients go back as soon as they are
// known, and the weight gradient is one product over the batch instead of
// M small ones that each rewrite the whole gradient
// (PipelineOptions::defer_weight_gradients).
//
// Several chunks per rank (interleaved 1F1B, ZB-V: PipelineOptions::chunks):
// the model is cut into ranks x chunks stages laid out as the schedule says
// (model_stage), each rank building and holding the layers of its chunks in
// one Sequential, named by their index in the whole model, and running each
// chunk as a Sequential of its own layers. An activation or gradient
// between chunks of two ranks goes over MPI (the last rank's chunk feeds the
// first rank's next one in a loop); between chunks of one rank (ZB-V's turn
// at the last rank) it is handed over in memory. Not yet in a hybrid or
// with tensor groups.
//
// Micro-batching and layer state: BatchNorm computes its statistics per
// micro-batch (as GPipe does), so with M > 1 it does not equal the unsplit
// batch; dropout draws its masks per micro-batch from the generator in
// schedule order, reproducible for a seed, stage count, chunks per rank
// and M.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <ddl/core/random.hpp>
#include <ddl/layers/layer_list.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>
#include <ddl/parallel/strategies/pipeline/stage_split.hpp>
#include <ddl/parallel/strategies/process_grid.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>
#include <ddl/parallel/tensor/tensor_plan.hpp>

namespace ddl::parallel {

// The micro-batches of a batch when none are asked for: two per stage, so
// the bubble (p - 1)/(M + p - 1) stays under a third without cutting a
// batch into slivers.
inline constexpr int kMicroBatchesPerStage = 2;

// When a stage packs its weights once per batch (PipelineOptions::pack_weights).
// Packing a weight costs about half a product of 128 rows by it (wide_mlp:
// 15.6 against 35 ms) and saves a few ms on each product of a micro-batch
// (docs/PERFORMANCE.md): with 2 micro-batches it costs more than it saves,
// with 4 about as much, from 6 on it wins.
enum class PackWeights {
  Auto,  // from kPackFromMicroBatches micro-batches a batch on
  On,    // whenever a batch has more than one micro-batch
  Off,
};
inline constexpr std::size_t kPackFromMicroBatches = 4;

// "auto", "on" or "off".
std::string_view pack_weights_name(PackWeights mode);
std::vector<PackWeights> all_pack_weights();
// Whether a batch of `micro_batches` packs its weights under `mode`.
bool packs_weights(PackWeights mode, std::size_t micro_batches);

struct PipelineOptions {
  // Micro-batches per batch; a batch of fewer samples gets one per sample.
  // 0: kMicroBatchesPerStage per stage (per rank, with several chunks each).
  int micro_batches = 0;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  // Chunks of the model on each rank, for the schedules that give a rank
  // several (interleaved-1f1b: 2 or more; zb-v: 2): the model is cut into
  // ranks x chunks stages, laid out as the schedule says
  // (pipeline_schedule.hpp), and messages go over MPI. 0: the schedule's
  // own count (chunks_per_rank).
  int chunks = 0;
  // The times the schedules made by simulation (zb-v) order each rank's
  // actions by: per model stage, the forward, backward and weight-gradient
  // times (pipeline_schedule.hpp); default: unit times. make_setup gives
  // the measured ones under --balance time. Every rank must be given the
  // same, or their lists would not match.
  PipelineCosts schedule_costs{};
  // Hybrid: how a stage's gradients are averaged over the pipelines, as
  // DataParallelOptions says (algorithm, bucket size, 0: DDL_FUSION_THRESHOLD,
  // and when buckets go out: during the stage's last backward or after).
  AllreduceAlgorithm allreduce = AllreduceAlgorithm::ring;
  std::int64_t bucket_bytes = 0;
  Overlap overlap = Overlap::automatic;
  // Hybrid: each stage's state sharded over its data-parallel group (ZeRO
  // stages 1 and 2, sharding.hpp), as DataParallelOptions::sharding.
  Sharding sharding = Sharding::none;
  // Between stages that each drive a GPU of their own, send activations and
  // gradients with NCCL on the GPU (where ddl has NCCL); otherwise, and
  // when false, over MPI through host memory.
  bool nccl = true;
  // Dense weights' gradients computed once per batch, from the rows of
  // every micro-batch kept until the last backward (the B/W split of
  // zero-bubble schedules, core/deferred_gradients.hpp), instead of one
  // product per micro-batch right after its backward, added into the
  // gradient. Costs the kept rows until then: the batch's rows x each Dense
  // layer's inputs + outputs, floats, whatever the schedule (under 1F1B the
  // rest of a micro-batch's activations still go at its backward). With
  // M = 1 the result is the same bits. ZB-H1, ZB-H2 and ZB-V place each
  // micro-batch's weight gradients themselves, whatever this says: one
  // product each, the same bits as false.
  bool defer_weight_gradients = true;
  // On the CPU, each weight packed once per batch into the layout the GEMM
  // kernel reads (core/packed_weights.hpp) for the forward and
  // input-gradient products of every micro-batch, instead of by each
  // product anew (see PackWeights). Costs a copy of the stage's 2-D weights
  // per orientation (forward, transposed), kept by the thread between steps
  // for the next one to pack into; where oneDNN reads weights plain (AVX2
  // machines) nothing is copied and nothing changes. Changes the rounding
  // of those products, alike for every schedule; with M = 1 no weight is
  // packed.
  PackWeights pack_weights = PackWeights::Auto;
  // Activation recomputation: each stage runs as one recomputed segment
  // (layers/recompute.hpp), keeping of a micro-batch's activations only its
  // input (and its output, which backward starts from; with deferred weight
  // gradients the Dense layers' rows too) between its forward and its
  // backward, which runs the stage's forward again.
  // The same bits; costs one more forward per micro-batch.
  bool recompute = false;
};

// The micro-batches `options` cut each batch into on `stages` stages.
int micro_batches(const PipelineOptions& options, int stages);
// Where a stage computes its weight gradients under `options`: where the
// schedule places them (ZB-H1, ZB-H2, ZB-V), else at the batch's end or
// right after
// each backward, by defer_weight_gradients.
WeightGradients weight_gradients_of(const PipelineOptions& options);

// Where one stage's training time went, summed over the steps so far.
struct PipelineStatistics {
  std::int64_t steps = 0;
  double step_seconds = 0.0;     // in forward_backward, from the first action to the last send's completion
  double compute_seconds = 0.0;  // in forwards and backwards
  std::int64_t messages = 0;     // activations and gradients sent in training steps (not evaluation's)
  std::int64_t bytes = 0;
  int peak_micro_batches = 0;           // most micro-batches (of chunks: chunk-micro-batches) held at once
  std::size_t peak_deferred_bytes = 0;  // most bytes of rows kept for the deferred weight gradients
  std::size_t peak_packed_bytes = 0;    // most bytes of weights packed for a step (PipelineOptions::pack_weights)
  // The first step's share of the two times above, apart: it also
  // allocates, page-faults and packs into fresh memory, so its idle time
  // says more about start-up than about the schedule.
  double first_step_seconds = 0.0;
  double first_compute_seconds = 0.0;
  // The share of the stage's step time spent not computing: waiting for its
  // neighbours, and idle at the start and end of the schedule. Over the
  // steps after the first where there are any (the steady state a
  // schedule's bubble formula describes), else over the first.
  double idle_fraction() const;
  double first_idle_fraction() const;
};

class Pipeline : public optim::Strategy {
 public:
  // `comm` holds one rank per stage, in stage order; `stages` lists the
  // layers of each (stage_split.hpp): contiguous, starting at layer 0, one
  // per rank (ranks x chunks under a schedule of several chunks per rank:
  // model_stage says which are whose). Throws ddl::Error, alike on every
  // rank, when they do not fit.
  Pipeline(Communicator comm, std::vector<StageRange> stages, PipelineOptions options = {});
  // Hybrid: one stage of one of the grid's pipelines; `stages` as above,
  // one per rank of grid.pipeline. With tensor groups (grid.tensor of T > 1
  // ranks), `tensor` is the plan every stage's layers are split by, for T
  // ranks, over a TensorGroup on grid.tensor summing with
  // options.allreduce; no stage may begin inside one of its pairs
  // (TensorPlan::pair_across), and no state is sharded.
  Pipeline(ProcessGrid grid, std::vector<StageRange> stages, PipelineOptions options = {},
           std::optional<TensorPlan> tensor = std::nullopt);
  ~Pipeline() override;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // This rank's stage (its place in the pipeline), the pipeline's ranks,
  // the chunks of the model each holds, and the layers of the whole model
  // a rank holds, one range per chunk (in chunk order: increasing layers).
  int stage() const;
  int stage_count() const;
  int chunks() const;
  std::vector<StageRange> layers() const;
  std::vector<StageRange> layers_of(int stage) const;
  // Every stage of the model (stage_count() x chunks() of them), in order.
  const std::vector<StageRange>& stages() const;
  // As given, with the micro-batch count resolved (micro_batches()).
  const PipelineOptions& options() const;
  const Communicator& communicator() const;
  PipelineStatistics statistics() const;
  // Whether activations and gradients travel over NCCL (decided at the
  // first batch; false before it).
  bool over_nccl() const;

  // Pipelines in the grid (1 without one).
  int data_parallel() const;
  // Hybrid: the DataParallel that averages this stage's gradients over the
  // pipelines (its buckets, its statistics); a ddl::Error without a grid.
  DataParallel& gradients() const;
  // With tensor groups: this stage's group and the plan (null without).
  std::shared_ptr<const TensorGroup> tensor_group() const;
  const TensorPlan* tensor_plan() const;
  // What the tensor group's allreduces sent in the training steps'
  // schedules so far (0 without one; MPI's builtin counts nothing).
  std::int64_t tensor_bytes_sent() const;

  int rank() const override;
  int world_size() const override;
  // Every stage of a pipeline reads every batch of the pipeline's shard.
  optim::Shard shard() const override;
  // cuda:<node-local rank> for CUDA, or the only GPU a rank sees, once every
  // rank has checked it has one (collective).
  Device device(DeviceType type) override;
  // Checks that `model` is this stage's part (built by build_stage); with
  // several pipelines, the first one's state is broadcast to the others and
  // the stage's gradient buckets are made. With several chunks per rank,
  // `model` holds them all, each run as a Sequential of its own layers.
  void prepare(layers::Module& model, optim::Optimizer* optimizer) override;
  // Hybrid: the stage's gradients start as zeroed views into its buckets.
  void begin_step(layers::Module& model) override;
  optim::StepOutput forward_backward(layers::Module& model, const optim::LossFunction& loss, const optim::Batch& batch,
                                     const optim::StepShare& share) override;
  // Hybrid: waits for the stage's buckets, averaged over the pipelines.
  void synchronize_gradients(layers::Module& model) override;
  optim::StepOutput forward(layers::Module& model, const optim::Batch& batch,
                            const optim::LossFunction& loss = {}) override;
  // Hybrid with sharding: the stage's DataParallel steps its chunks.
  void update(layers::Module& model, optim::Optimizer& optimizer) override;
  void gather_state(const layers::Module& model, optim::TrainingState& state) override;
  void select_state(const layers::Module& model, optim::TrainingState& state) override;
  // Over the ranks of tensor rank 0, then from there to the rest of each
  // tensor group: its ranks compute the same outputs and losses.
  void sum_over_ranks(std::vector<double>& values) override;
  // A single pipeline: rank 0's flags (it holds the loss the last stage
  // sent after its last forward), broadcast; a stage then waits for no
  // stage behind it, and consecutive steps overlap (ZB-H2's parallelogram).
  // Hybrid and tensor groups: sum_over_ranks.
  void agree_on_step(std::vector<double>& flags) override;
  // Hybrid: "2 pipelines (ring allreduce, 64 per pipeline)", and the tensor
  // groups' plan; a single pipeline without them says nothing here (its
  // stages are a table of their own).
  std::string describe(std::int64_t shard_batch) const override;
  // A memory monitor of the stage's device, for report().
  std::vector<std::shared_ptr<optim::Callback>> callbacks(const layers::Module& model) override;
  // Collective: every stage's layers, memory and idle time against the
  // textbook bubble (pipeline_report.hpp), for the root to print; hybrid:
  // then the time the stage waited for its gradients.
  std::string report(const layers::Module& model, const optim::Optimizer& optimizer) override;

 private:
  struct State;
  class StageRun;  // one batch through this stage (pipeline.cpp)
  std::shared_ptr<State> state_;
  std::shared_ptr<optim::StepMemoryMonitor> memory_;  // made by callbacks()
};

// This rank's stage of the model `layers` describes: its layers alone, named
// by their index in the whole model, with the weights they have there (with
// tensor groups, this rank's slices of them: build_tensor_parallel).
std::shared_ptr<layers::Sequential> build_stage(const layers::LayerList& layers, const Pipeline& pipeline,
                                                Generator* generator = nullptr);

}  // namespace ddl::parallel
