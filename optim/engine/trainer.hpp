// Trainer: the one training engine (docs/ARCHITECTURE.md), in the manner of
// Keras' model.fit. It runs epochs of batches from a BatchSource through a
// model, a loss and an optimizer; reports metrics, progress and History;
// calls callbacks; and saves and restores checkpoints that resume exactly.
// How the work is spread over devices and ranks is the Strategy's business:
// the loop below is the same for one CPU and for many ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ddl/core/error.hpp>
#include <ddl/core/random.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/batch_source.hpp>
#include <ddl/optim/engine/callback.hpp>
#include <ddl/optim/engine/checkpoint.hpp>
#include <ddl/optim/engine/logs.hpp>
#include <ddl/optim/engine/loss_guard.hpp>
#include <ddl/optim/engine/metrics.hpp>
#include <ddl/optim/engine/progress.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/optim/optimizer.hpp>

namespace ddl::optim {

struct TrainerOptions {
  std::vector<Metric> metrics{};  // reported besides the loss
  std::int64_t classes = 0;       // the output's dim 1: Metric::mean_iou needs it
  Verbosity verbosity = Verbosity::progress;
  // Where progress goes (rank 0 only); nullptr: std::cout.
  std::ostream* out = nullptr;
  // Whether `out` is a terminal; unset: detected for std::cout, false otherwise.
  std::optional<bool> terminal{};
  // How training is spread over devices and ranks; nullptr: this process alone.
  std::shared_ptr<Strategy> strategy{};
  // The random stream the model draws from (dropout masks), whose state
  // checkpoints keep; nullptr: ddl::default_generator().
  Generator* generator = nullptr;
  // Gradient accumulation: the batches whose gradients are summed into one
  // optimizer step, each loss weighted by its share of the step's samples,
  // so that K batches of B make the step one batch of K·B would (up to
  // rounding; BatchNorm's statistics and dropout's draws stay per batch).
  // The epoch's last step takes the batches that remain. Steps, callbacks'
  // batch hooks and per-step schedules count optimizer steps (on_batch_begin
  // comes once the step's batches are read).
  std::int64_t batches_per_step = 1;
  // What a step whose loss is NaN or infinite on any rank does, or one whose
  // loss diverged (see divergence_factor); the check is agreed over the
  // ranks before the update, so the weights never take such a step. stop:
  // fit() throws NonFiniteLoss or DivergedLoss naming the epoch, the step
  // and the rank (Keras' TerminateOnNaN, but before the damage, so no
  // checkpoint is written from what followed). skip: the step's update is
  // dropped and counted in the logs' "skipped_steps" (as mixed-precision
  // trainers skip overflowing steps); an epoch whose every step is skipped
  // stops all the same.
  enum class OnNonFinite { stop, skip } on_non_finite = OnNonFinite::stop;
  // A step's loss above this many times the larger of the medians of the
  // first 8 and the last 64 steps' losses has diverged (LossGuard); 0 turns
  // the check off. 1000: an exploding run passes it within a step or two,
  // and a healthy batch is nowhere near it (an untrained classifier's
  // loss is ln(classes), a diverged one's 1e30).
  double divergence_factor = 1000.0;
};

// fit() stopped at a step whose loss says training went wrong, before its
// update. Every rank throws it (the verdict is agreed over them); the root
// rank reports it, so a program prints it once.
class StoppedByLoss : public Error {
 public:
  StoppedByLoss(const std::string& message, bool reporter) : Error(message), reporter_(reporter) {}
  bool reporter() const { return reporter_; }

 private:
  bool reporter_;
};

// The loss was not finite.
class NonFiniteLoss : public StoppedByLoss {
 public:
  using StoppedByLoss::StoppedByLoss;
};

// The loss was finite but had diverged (TrainerOptions::divergence_factor).
class DivergedLoss : public StoppedByLoss {
 public:
  using StoppedByLoss::StoppedByLoss;
};

struct FitOptions {
  // The total number of epochs: a trainer resumed at epoch 2 with epochs = 4
  // trains epochs 3 and 4 (Keras' initial_epoch, taken from the checkpoint).
  std::int64_t epochs = 1;
  // Evaluated after every epoch; its metrics are logged with a "val_" prefix.
  BatchSource* validation = nullptr;
  std::vector<std::shared_ptr<Callback>> callbacks{};
};

class Trainer {
 public:
  // Batch size, shuffling and the shuffle seed belong to the BatchSource
  // (models::DataLoader); the model must already be on its device.
  Trainer(std::shared_ptr<layers::Module> model, LossFunction loss, std::shared_ptr<Optimizer> optimizer,
          TrainerOptions options = {});

  // Trains from epoch() up to options.epochs and returns the History of the
  // epochs trained in this call. Stops early when a callback asks.
  History fit(BatchSource& train, const FitOptions& options = {});
  // The loss and metrics over one pass of `data` in evaluation mode, averaged
  // over all ranks' samples.
  Logs evaluate(BatchSource& data);
  // The model's outputs for one pass of `data` (this rank's shard), in order,
  // concatenated along the first dim, in evaluation mode (undefined on a
  // rank whose strategy does not compute, a parameter server). The shard's
  // last batch may end in padding (Batch::padding): to pair outputs with
  // targets under data parallelism, use for_each_output.
  Tensor predict(BatchSource& data);
  // One pass of `data` (this rank's shard) in evaluation mode without
  // gradients, calling `visit` with each batch's output and the batch; a
  // rank whose strategy computes no output (a parameter server, a pipeline
  // stage before the last) is not called. Statistics summed here over the
  // batch's own samples (the first batch.size() - batch.padding) and then
  // over the ranks (strategy().sum_over_ranks) cover every sample once.
  void for_each_output(BatchSource& data, const std::function<void(const Tensor& output, const Batch& batch)>& visit);

  // Checkpoints hold the model's parameters and buffers ("model.<name>"),
  // the optimizer's state ("optimizer.<entry>"), the epoch and step counts,
  // the generator's seed and offset, and the state of the callbacks of the
  // running fit(); saved from a callback's on_batch_end (mid-epoch), also
  // how far the epoch got and its metrics so far, summed over the ranks.
  // Saving writes atomically (optim/engine/checkpoint.hpp) and, under
  // a strategy, on the root rank only; call it on every rank all the same,
  // since a strategy may first gather state held elsewhere (the parameter
  // server's optimizer state). Loading validates everything before
  // it changes anything; the callbacks' state is restored when the next
  // fit() starts. A resumed fit(), between epochs or mid-epoch,
  // continues bitwise as the uninterrupted run would on the same hardware,
  // thread count and rank count. A state holding NaN or infinity on any
  // rank is not written (an error on every rank; the file there is kept).
  void save_checkpoint(const std::string& path) const;
  void load_checkpoint(const std::string& path);

  std::int64_t epoch() const { return epoch_; }  // epochs completed
  std::int64_t step() const { return step_; }    // optimizer steps taken
  // Batches of the epoch in progress already trained: set during fit(), and
  // after loading a checkpoint taken mid-epoch, where the next fit() resumes
  // (0 between epochs).
  std::int64_t epoch_batches() const { return in_epoch_.batches; }
  // Asks fit() to stop after the current epoch (early stopping).
  void request_stop() { stop_requested_ = true; }
  // Prints `line` and a newline where progress goes, unless quiet or not the
  // root rank: callbacks report through it.
  void print(const std::string& line) const;

  layers::Module& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  Strategy& strategy() { return *strategy_; }
  const TrainerOptions& options() const { return options_; }

 private:
  Logs train_epoch(BatchSource& train, const std::vector<Callback*>& callbacks, ProgressPrinter& progress);
  // One optimizer step over `batches` (gradient accumulation when several);
  // false when it was skipped for a non-finite or diverged loss. `where` names the step
  // in errors ("epoch 2/5, step 7 of 40").
  bool train_step(const std::vector<Batch>& batches, MetricAccumulator& metrics, const std::string& where);
  // Adds a batch's output and loss to `metrics`, all but its padding.
  void add_metrics(MetricAccumulator& metrics, const StepOutput& result, const Batch& batch) const;
  // Runs the strategy's prepare() once, and again after a checkpoint load.
  void ensure_prepared();
  Checkpoint make_checkpoint(const TrainingState& state, const std::vector<double>& epoch_sums) const;
  std::ostream& out() const;
  bool prints() const;

  std::shared_ptr<layers::Module> model_;
  LossFunction loss_;
  std::shared_ptr<Optimizer> optimizer_;
  TrainerOptions options_;
  std::shared_ptr<Strategy> strategy_;
  Generator* generator_;
  std::int64_t epoch_ = 0;
  std::int64_t step_ = 0;
  // How far the epoch in progress got. During fit() `metrics` points at its
  // running sums; after a mid-epoch load, `resumed_sums` holds the sums to
  // start from (the ranks' total on the root, zeros elsewhere).
  struct EpochPosition {
    std::int64_t batches = 0;
    std::int64_t steps = 0;
    std::int64_t skipped = 0;
    MetricAccumulator* metrics = nullptr;
    std::vector<double> resumed_sums;
  } in_epoch_;
  LossGuard loss_guard_;
  bool stop_requested_ = false;
  bool prepared_ = false;
  // Callbacks of the fit() in progress (for their state in checkpoints), and
  // a loaded checkpoint whose callback state the next fit() restores.
  std::vector<Callback*> active_callbacks_;
  std::optional<Checkpoint> pending_callback_state_;
};

}  // namespace ddl::optim
