// DataParallel: the data-parallel strategy for the Trainer (what Horovod and
// PyTorch DDP do). Every rank holds the whole model and trains on its own
// shard of each epoch; after each backward the gradients are averaged over
// the ranks, so every rank takes the same optimizer step and the ranks stay
// identical.
//
//   prepare: the ranks check they built the same model, then rank 0's
//     parameters, buffers and optimizer state are broadcast to all (so a
//     resume from rank 0's checkpoint reaches everyone). Sharded, the
//     optimizer's state is not: every rank must hold the same (fresh, or
//     read from the checkpoint every rank reads, as the Trainer does).
//   begin_step: each step's gradients start as zero views into their
//     buckets (gradient_buckets.hpp), so backward accumulates them in place.
//   forward_backward: during the step's last backward (earlier ones, with
//     gradient accumulation, only add up: DDP's no_sync), as each gradient
//     is complete a hook counts it (or copies it in, for a parameter on
//     another device than its bucket), and a full bucket is handed to the
//     communication thread, whose allreduce overlaps the rest of backward.
//   synchronize_gradients: waits for every bucket, averaged over the ranks
//     by the allreduce itself (ReduceOp::average): the buckets then hold
//     the parameters' averaged .grad.
//   metrics: summed over ranks; only rank 0 prints, logs and checkpoints.
//
// Where the gradients are reduced: a model on one GPU per rank, in a build
// with NCCL, keeps its buckets on the GPU and reduces them there with the
// chosen algorithm (collectives.hpp: ring, rhd, tree, naive over NCCL's
// point-to-point messages, builtin as ncclAllReduce) on NCCL's stream.
// Every other case reduces host buckets with the chosen MPI collective: no
// NCCL, ranks sharing a GPU (NCCL refuses them), shm, or fp16 compression;
// a GPU bucket is then copied to the host and back once per step. The
// ranks check that they all chose the same way.
//
// Sharded (DataParallelOptions::sharding, sharding.hpp: ZeRO stages 1 to
// 3): each bucket is reduce-scattered instead, rank r keeping the average
// of its chunk r; update() steps the optimizer on those chunks alone and
// (stages 1 and 2) allgathers the parameters; stage 3 gathers each
// bucket's parameters around its layers instead (gathered_forward.hpp),
// and a parameter reads zeros outside them (gather_parameters() below).
// The weights are the unsharded run's, bit for bit; each rank keeps 1/N of
// the optimizer state (and of the gradients, and of the parameters).
//
// Parameters that receive no gradient in a step count as zero gradients
// (every rank must still send the bucket). Each parameter must be used once
// per forward pass when buckets are reduced during backward (overlap on,
// or sharding gradients or parameters: its hook fires once); with shared
// weights turn overlap off and shard at most the optimizer state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/strategies/gradient_buckets.hpp>
#include <ddl/parallel/strategies/sharding.hpp>

namespace ddl::parallel {

// on: each bucket is reduced on a communication thread as soon as backward
// fills it, while backward goes on; off: all of them after backward, on the
// training thread. automatic: on where that thread has something to run on,
// a core the node's ranks' compute threads leave free or buckets reduced
// on the GPU; off where it would only take its time from backward
// (measured on 2 cores with 2 ranks x 1 thread, docs/PERFORMANCE.md: 2 to
// 5 points of efficiency lost, though the wait it hides shrank). A model
// whose gradients fit one bucket is reduced after backward either way (the
// bucket is full only when backward ends: nothing to overlap).
enum class Overlap { automatic, on, off };

// "auto", "on", "off", and back.
std::string_view overlap_name(Overlap overlap);
Overlap parse_overlap(std::string_view name);
const std::vector<Overlap>& all_overlaps();

struct DataParallelOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring;
  // Bucket size; 0: DDL_FUSION_THRESHOLD (default 25 MiB, PyTorch DDP's).
  std::int64_t bucket_bytes = 0;
  // The first bucket's (the last layers', whose gradients come first), as
  // PyTorch DDP's first bucket; 0: 1 MiB, or bucket_bytes if smaller.
  std::int64_t first_bucket_bytes = 0;
  // When the buckets are reduced (Overlap below).
  Overlap overlap = Overlap::automatic;
  // Send gradients as float16 (half the bytes; sums still in float32).
  // Ring allreduce only. Gradients lose precision beyond 3 digits and must
  // stay below 65504 in magnitude.
  bool fp16_compression = false;
  // How much of the training state each rank keeps (sharding.hpp): all of
  // it (none), or 1/N of the optimizer state (ZeRO stage 1), and of the
  // gradients too (stage 2). Sharding needs the ring, rhd or builtin
  // (algorithms with a reduce-scatter and an allgather), float32 on the
  // wire, and parameters in host memory.
  Sharding sharding = Sharding::none;
};

// Where a data-parallel step's time went, summed over the steps so far.
struct SyncStatistics {
  std::int64_t steps = 0;
  double step_seconds = 0.0;  // forward, backward and gradient synchronisation
  double wait_seconds = 0.0;  // in synchronize_gradients, waiting for buckets
  // Sent by this rank from begin_step to the end of synchronize_gradients
  // and of update(): the gradients' reduction and, sharded, the
  // parameters' gathers, as Communicator::bytes_sent counts them (MPI's
  // own collectives, builtin and shm's window: nothing).
  std::int64_t bytes_sent = 0;
  double fraction_waiting() const { return step_seconds > 0.0 ? wait_seconds / step_seconds : 0.0; }
};

class DataParallel : public optim::Strategy {
 public:
  explicit DataParallel(Communicator comm, DataParallelOptions options = {});
  ~DataParallel() override;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const override;
  int world_size() const override;
  // cuda:<node-local rank> for CUDA, after every rank has checked it has
  // that GPU (collective); the CPU as in one process.
  Device device(DeviceType type) override;
  void prepare(layers::Module& model, optim::Optimizer* optimizer) override;
  void begin_step(layers::Module& model) override;
  optim::StepOutput forward_backward(layers::Module& model, const optim::LossFunction& loss, const optim::Batch& batch,
                                     const optim::StepShare& share) override;
  // Sharding parameters: the layers run one by one, each bucket gathered
  // for its layers (gathered_forward.hpp).
  optim::StepOutput forward(layers::Module& model, const optim::Batch& batch, const optim::LossFunction& loss) override;
  void synchronize_gradients(layers::Module& model) override;
  // Sharded: the optimizer steps this rank's chunks, then (stages 1 and 2)
  // the parameters are allgathered. Otherwise the optimizer's step.
  void update(layers::Module& model, optim::Optimizer& optimizer) override;
  // Sharded: the optimizer's state gathered from the ranks' chunks into
  // the single-process format, and cut back into this rank's on load.
  void gather_state(const layers::Module& model, optim::TrainingState& state) override;
  void select_state(const layers::Module& model, optim::TrainingState& state) override;
  void sum_over_ranks(std::vector<double>& values) override;
  // For a strategy that runs the backward passes itself (a hybrid
  // pipeline's stage, between begin_step and synchronize_gradients): the
  // step's last accumulation into every gradient follows, so each bucket is
  // sent as soon as it fills, overlapping what is left of the backward
  // (forward_backward does this before the step's last batch).
  void expect_final_gradients();
  // "data-parallel over 2 ranks (ring allreduce, 64 per rank)".
  std::string describe(std::int64_t shard_batch) const override;
  // A step memory monitor over the model's devices, for report().
  std::vector<std::shared_ptr<optim::Callback>> callbacks(const layers::Module& model) override;
  // The share of step time spent waiting for the gradients, the buckets and
  // whether they overlapped backward (statistics()); then each rank's
  // training state, peak activations and peak resident set beside ZeRO's
  // formula (a collective).
  std::string report(const layers::Module& model, const optim::Optimizer& optimizer) override;

  const Communicator& communicator() const;
  const DataParallelOptions& options() const;
  std::size_t bucket_count() const;
  // After prepare(): whether buckets are reduced during backward (overlap
  // on, or automatic where it has a core or a GPU, and more than one bucket),
  // and why, for the report.
  bool overlapping() const;
  const std::string& overlap_reason() const;
  // After prepare(): whether the buckets are reduced in GPU memory over
  // NCCL (see above), rather than in host memory over MPI.
  bool reduces_on_gpu() const;
  // The buckets, after prepare(): which parameter lies where.
  const std::vector<GradientBucket>& buckets() const;
  SyncStatistics statistics() const;
  // After prepare() with sharding: this rank's share of the state; null unsharded.
  const ShardedState* sharded_state() const;
  // Sharding parameters: a parameter is whole only while its layers run
  // (elsewhere its memory reads as zeros). This gathers every bucket, so
  // the model's parameters hold their values until the next training step
  // or evaluation releases them, and what is written into them meanwhile
  // is what that step sees (its chunks are taken from them); a collective.
  // Nothing otherwise. whole_parameters: the same, for the Trainer's callers.
  void gather_parameters();
  void whole_parameters(layers::Module& model) override;
  // After prepare() with an optimizer: the bytes of training state this
  // rank keeps between steps, and what ZeRO's formula says it should.
  StateBytes resident_state(const layers::Module& model, const optim::Optimizer& optimizer) const;
  StateBytes formula_state(const layers::Module& model, const optim::Optimizer& optimizer) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace ddl::parallel
