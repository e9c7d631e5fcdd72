// Strategy: how the one training loop of Trainer is spread over devices and
// ranks: parallelism is a strategy object plugged into the Trainer, never a
// second training loop. The base class is the single-process strategy;
// data parallelism, the parameter server and pipelines override the hooks
// below. The Trainer calls them in this order:
//
//   prepare(model, optimizer)         once, and again after a checkpoint load
//   fit, per epoch:
//     begin_epoch(train, epoch)
//     per optimizer step:
//       next_batch(train)             K times (K = batches_per_step; fewer at
//                                     the epoch's end)
//       begin_step(model)             the gradients start afresh
//       forward_backward(model, loss, batch_k, share_k)   for k = 0 .. K-1
//       synchronize_gradients(model)
//       agree_on_step(whether a loss was not finite)    every rank agrees
//       update(model, optimizer)                        unless it was
//     sum_over_ranks(metric sums)
//   evaluate / predict: begin_epoch, next_batch and forward per batch,
//     (evaluate) sum_over_ranks
//   save_checkpoint: gather_state(model, state) on every rank, then
//     sum_over_ranks(whether the state is not finite), (mid-epoch)
//     sum_over_ranks(metric sums); the root writes it; sum_over_ranks(
//     whether it failed)
//   load_checkpoint: every rank reads the file, select_state(model, state)
//   fit also runs callbacks(model), once per fit, beside the caller's
//   callbacks; after training the program asks report(model, optimizer)
//   on every rank, and describe() for its header at any time
//
// Every hook is called on every rank, so a strategy may run collectives in
// any of them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/batch_source.hpp>

namespace ddl::optim {

class Callback;
class Optimizer;

// The loss of a batch from the model's output and the batch's targets, e.g.
// layers::cross_entropy; it must return the mean over the batch's samples,
// a scalar whose backward() fills the parameters' gradients (metrics weigh
// it by the batch size, and accumulation by the batch's share of the step).
using LossFunction = std::function<Tensor(const Tensor& output, const Tensor& target)>;

// A batch's output and mean loss on the rank that computes them. Both are
// undefined on a rank that computes no loss (a parameter server, a pipeline
// stage before the last): such a rank contributes nothing to the metrics.
struct StepOutput {
  Tensor output;
  Tensor loss;
};

// Where a batch lies in its optimizer step. With gradient accumulation a
// step is K batches whose gradients are summed: each batch's loss is scaled
// by its share of the step's samples, so the sum is the gradient of the mean
// loss over all of them (one batch of their concatenation).
struct StepShare {
  double loss_scale = 1.0;  // this batch's samples / the step's samples
  bool last = true;         // the step's last batch: gradients are complete after its backward
};

// The model's and optimizer's state as a checkpoint holds it: named
// parameters and buffers, and Optimizer::state()'s entries.
struct TrainingState {
  std::vector<std::pair<std::string, Tensor>> model;
  std::vector<std::pair<std::string, Tensor>> optimizer;
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  bool is_root() const { return rank() == 0; }
  // The part of every epoch this rank steps through: rank r of the ranks
  // that read data (world_size() by default). Its batch count is this
  // rank's steps per epoch.
  virtual Shard shard() const { return {rank(), world_size()}; }

  // The device of `type` this rank computes on when the user names only the
  // type ("cuda"): device 0 in one process; one GPU per rank, numbered by
  // the node-local rank, under data parallelism. Call it on every rank: a
  // strategy may check with the others that each rank has its device.
  virtual Device device(DeviceType type);

  // Once before training starts, and after a checkpoint is loaded: make every
  // rank start from the same parameters, buffers and optimizer state (data
  // parallelism broadcasts rank 0's). `optimizer` is null for evaluation.
  virtual void prepare(layers::Module& model, Optimizer* optimizer);

  // Starts an epoch of `data` (training, evaluation or prediction) and
  // gives its batches one by one: by default this rank's shard() of it. A
  // rank that reads no data (a parameter server) still takes one step per
  // batch of the ranks that do, with empty batches.
  virtual void begin_epoch(BatchSource& data, std::int64_t epoch);
  virtual std::optional<Batch> next_batch(BatchSource& data);

  // Before the first forward pass of an optimizer step: every gradient
  // starts afresh (none, so backward writes a new one; data parallelism
  // points them at zeroed views into its buckets).
  virtual void begin_step(layers::Module& model);

  // Forward and backward of one batch of the step, whose loss counts with
  // share.loss_scale; backward adds to the gradients of the step's earlier
  // batches. Returns the unscaled loss. A pipeline strategy schedules the
  // batch's micro-batches over its stages here.
  virtual StepOutput forward_backward(layers::Module& model, const LossFunction& loss, const Batch& batch,
                                      const StepShare& share = {});

  // After the step's last backward: data parallelism waits here for its
  // gradient buckets to be averaged over the ranks.
  virtual void synchronize_gradients(layers::Module& model);

  // Applies the step's gradients: by default the optimizer's step. The
  // parameter server's workers instead send their gradients to the servers
  // and receive the new values, and the servers step their share.
  virtual void update(layers::Module& model, Optimizer& optimizer);

  // The forward pass alone (evaluate, predict): the output and, when `loss`
  // is given, its loss, on the rank that reports them; undefined on a rank
  // that computes no output.
  virtual StepOutput forward(layers::Module& model, const Batch& batch, const LossFunction& loss = {});

  // Before a checkpoint is written, on every rank (only the root writes):
  // `state` holds this rank's model and optimizer state, and a strategy
  // whose state lives on other ranks gathers it into the root's here, under
  // the names a single process would give it (the parameter server's
  // servers own the optimizer state of their share; pipeline stages own
  // their layers).
  virtual void gather_state(const layers::Module& model, TrainingState& state);

  // After a checkpoint is read, on every rank: `state` holds the whole
  // model's and optimizer's state as a single process names it, and a
  // strategy whose ranks hold parts of the model keeps this rank's part,
  // named as `model` and its optimizer name it (a pipeline stage keeps its
  // layers'). What is left must match exactly.
  virtual void select_state(const layers::Module& model, TrainingState& state);

  // Between steps, on every rank, before something outside training reads
  // or writes the model's parameters (EarlyStopping's best weights): a
  // strategy that keeps only part of them on each rank (DataParallel's
  // sharded parameters) makes them whole here, and keeps what is written
  // from then until the next step. A collective there, so every rank must
  // call it at the same point (EarlyStopping does on an improvement of its
  // metric, which every rank sees alike when it is summed over them, as
  // loss and accuracy are; not a per-rank one such as time_s); nothing
  // elsewhere.
  virtual void whole_parameters(layers::Module& /*model*/) {}

  // Sums `values` element-wise over the ranks in place, so every rank
  // reports (and early-stops on) the same metrics.
  virtual void sum_over_ranks(std::vector<double>& values);

  // After synchronize_gradients: `flags` (whether this rank's loss was not
  // finite or diverged, and its rank where it was) summed over the ranks
  // that compute a loss, the same on every rank, so that all skip or stop
  // alike. By default sum_over_ranks. A pipeline's stages take the verdict
  // of the rank that reports its loss instead, so that no stage waits for
  // the ones behind it before its update and its next step.
  virtual void agree_on_step(std::vector<double>& flags) { sum_over_ranks(flags); }

  // How the strategy spreads a step whose data shard (shard()) reads
  // `shard_batch` samples, for a run's header: "data-parallel over 2 ranks
  // (ring allreduce, 64 per rank)". Empty where there is nothing to say
  // (one process).
  virtual std::string describe(std::int64_t shard_batch) const;

  // Callbacks the strategy runs during fit beside the caller's, such as
  // the memory monitor its report() reads; the same objects at every call.
  virtual std::vector<std::shared_ptr<Callback>> callbacks(const layers::Module& model);

  // After training, on every rank (a strategy may gather from the others
  // here, so call it on all of them): what the strategy measured, for the
  // root to print (the time spent waiting for gradients, each pipeline
  // stage's memory and idle time). Empty in one process.
  virtual std::string report(const layers::Module& model, const Optimizer& optimizer);

 protected:
  // The backward pass of a batch's loss, scaled by its share of the step:
  // what forward_backward runs after its forward.
  static void backward(const StepOutput& result, const StepShare& share);
};

}  // namespace ddl::optim
