// The training engine (see trainer.hpp). One loop, whatever the strategy:
// per step, zero the gradients, forward and backward (per accumulated
// batch), synchronise the gradients, update; metrics are summed locally and
// added up over the ranks at the end of each epoch. Strategy.hpp lists the
// order of the strategy's hooks.
#include <ddl/optim/engine/trainer.hpp>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/layers/named_tensors.hpp>

namespace ddl::optim {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string callback_prefix(const Callback& callback) { return "callback." + callback.state_key() + "."; }

std::int64_t required_integer(const Checkpoint& checkpoint, const std::string& path, const std::string& name) {
  const auto found = checkpoint.integers.find(name);
  DDL_CHECK(found != checkpoint.integers.end(), "checkpoint '{}' is not a Trainer checkpoint: it has no integer '{}'",
            path, name);
  return found->second;
}

// The name of the first float tensor of `tensors` holding a NaN or an
// infinity, or empty. x * 0 is NaN exactly where x is not finite, so one
// sum per tensor finds it on any device.
std::string first_non_finite(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& prefix) {
  for (const auto& [name, tensor] : tensors) {
    if (tensor.dtype() != DType::Float32 || tensor.numel() == 0) continue;
    if (std::isnan(ddl::sum(ddl::mul(tensor.detach(), 0.0f)).to(cpu()).item())) return prefix + name;
  }
  return {};
}

// The ranks on which a condition holds, agreed with one small sum over them
// so that every rank takes the same branch: how many, and which one when it
// is one.
struct FlaggedRanks {
  int count = 0;
  int rank = 0;      // when count is 1
  int diverged = 0;  // of them, those whose loss is finite but diverged
  std::string describe() const { return count == 1 ? fmt::format("rank {}", rank) : fmt::format("{} ranks", count); }
};

std::vector<double> flags_of(const Strategy& strategy, bool flag, bool diverged) {
  return {flag ? 1.0 : 0.0, flag ? static_cast<double>(strategy.rank()) : 0.0, flag && diverged ? 1.0 : 0.0};
}

FlaggedRanks flagged_ranks(const std::vector<double>& sums) {
  return {static_cast<int>(sums[0]), static_cast<int>(sums[1]), static_cast<int>(sums[2])};
}

FlaggedRanks flagged_ranks(Strategy& strategy, bool flag) {
  std::vector<double> sums = flags_of(strategy, flag, false);
  strategy.sum_over_ranks(sums);
  return flagged_ranks(sums);
}

}  // namespace

Trainer::Trainer(std::shared_ptr<layers::Module> model, LossFunction loss, std::shared_ptr<Optimizer> optimizer,
                 TrainerOptions options)
    : model_(std::move(model)),
      loss_(std::move(loss)),
      optimizer_(std::move(optimizer)),
      options_(std::move(options)),
      strategy_(options_.strategy ? options_.strategy : std::make_shared<Strategy>()),
      generator_(options_.generator ? options_.generator : &default_generator()),
      loss_guard_(options_.divergence_factor) {
  DDL_CHECK(model_ != nullptr, "Trainer: the model is null");
  DDL_CHECK(static_cast<bool>(loss_), "Trainer: the loss function is empty");
  DDL_CHECK(optimizer_ != nullptr, "Trainer: the optimizer is null");
  DDL_CHECK(options_.batches_per_step >= 1, "Trainer: batches_per_step must be >= 1, got {}",
            options_.batches_per_step);
  MetricAccumulator(options_.metrics, options_.classes);  // refuses mean_iou without classes before any training
}

std::ostream& Trainer::out() const { return options_.out ? *options_.out : std::cout; }

bool Trainer::prints() const { return strategy_->is_root() && options_.verbosity != Verbosity::quiet; }

void Trainer::print(const std::string& line) const {
  if (prints()) out() << line << '\n' << std::flush;
}

void Trainer::ensure_prepared() {
  if (prepared_) return;
  strategy_->prepare(*model_, optimizer_.get());
  prepared_ = true;
}

History Trainer::fit(BatchSource& train, const FitOptions& options) {
  DDL_CHECK(options.epochs >= 0, "fit: epochs must be >= 0, got {}", options.epochs);
  ensure_prepared();
  // Checkpoint writers go last, so what they save includes the other
  // callbacks' state for the epoch; file writers run on the root rank only.
  std::vector<std::shared_ptr<Callback>> given = options.callbacks;
  for (auto& callback : strategy_->callbacks(*model_)) given.push_back(std::move(callback));
  std::vector<Callback*> callbacks;
  for (const bool writers : {false, true}) {
    for (const auto& callback : given) {
      DDL_CHECK(callback != nullptr, "fit: a callback is null");
      DDL_CHECK(!(callback->root_only() && callback->saves_checkpoints()),
                "fit: a callback that saves checkpoints must run on every rank (root_only() false): "
                "save_checkpoint is collective");
      if (callback->saves_checkpoints() != writers) continue;
      if (callback->root_only() && !strategy_->is_root()) continue;
      callbacks.push_back(callback.get());
    }
  }
  if (pending_callback_state_) {
    for (Callback* callback : callbacks) {
      if (!callback->state_key().empty()) callback->load_state(*pending_callback_state_, callback_prefix(*callback));
    }
    pending_callback_state_.reset();
  }
  active_callbacks_ = callbacks;
  struct ClearActive {
    std::vector<Callback*>& active;
    ~ClearActive() { active.clear(); }
  } clear_active{active_callbacks_};

  stop_requested_ = false;
  const bool terminal = options_.terminal.value_or(options_.out == nullptr && ::isatty(::fileno(stdout)) == 1);
  ProgressPrinter progress(out(), prints() ? options_.verbosity : Verbosity::quiet, terminal);
  History history;
  for (Callback* callback : callbacks) callback->on_train_begin(*this);
  while (epoch_ < options.epochs && !stop_requested_) {
    for (Callback* callback : callbacks) callback->on_epoch_begin(*this, epoch_);
    const auto epoch_start = Clock::now();
    progress.begin_epoch(epoch_, options.epochs, train.batches_per_epoch(strategy_->shard()));
    const Logs train_logs = train_epoch(train, callbacks, progress);
    in_epoch_ = {};

    Logs logs;
    logs.set("epoch", static_cast<double>(epoch_ + 1));
    for (const auto& [name, value] : train_logs) {
      if (name != "samples_per_s") logs.set(name, value);
    }
    if (options.validation != nullptr) {
      for (const auto& [name, value] : evaluate(*options.validation)) logs.set("val_" + name, value);
    }
    logs.set("lr", optimizer_->lr());
    logs.set("time_s", seconds_since(epoch_start));
    logs.set("samples_per_s", train_logs.at("samples_per_s"));

    ++epoch_;
    progress.end_epoch(logs);
    for (Callback* callback : callbacks) callback->on_epoch_end(*this, epoch_ - 1, logs);
    history.epochs.push_back(std::move(logs));
  }
  for (Callback* callback : callbacks) callback->on_train_end(*this);
  return history;
}

Logs Trainer::train_epoch(BatchSource& train, const std::vector<Callback*>& callbacks, ProgressPrinter& progress) {
  timeline::Span span("training", timeline::recording() ? fmt::format("epoch {}", epoch_ + 1) : std::string());
  model_->train();
  strategy_->begin_epoch(train, epoch_);
  MetricAccumulator metrics(options_.metrics, options_.classes);
  const auto start = Clock::now();
  const std::int64_t steps_per_epoch =
      (train.batches_per_epoch(strategy_->shard()) + options_.batches_per_step - 1) / options_.batches_per_step;
  // A checkpoint taken mid-epoch: the batches it had trained are read again
  // and dropped, so the data order and every later draw are those of the
  // uninterrupted run.
  std::int64_t& batches = in_epoch_.batches;
  std::int64_t& steps = in_epoch_.steps;
  std::int64_t& skipped = in_epoch_.skipped;
  for (std::int64_t b = 0; b < batches; ++b) {
    DDL_CHECK(strategy_->next_batch(train).has_value(),
              "fit: the checkpoint resumes epoch {} after {} batches, but this data gives only {}: is it the "
              "data the checkpoint was trained on?",
              epoch_ + 1, batches, b);
  }
  if (!in_epoch_.resumed_sums.empty()) {
    DDL_CHECK(in_epoch_.resumed_sums.size() == metrics.sums().size(),
              "fit: the checkpoint holds {} metric sums for the epoch in progress, this trainer's metrics {}",
              in_epoch_.resumed_sums.size(), metrics.sums().size());
    metrics.sums() = in_epoch_.resumed_sums;
    in_epoch_.resumed_sums.clear();
  }
  in_epoch_.metrics = &metrics;
  if (batches > 0) progress.update(batches, metrics.samples() * strategy_->shard().world, metrics.logs());
  std::vector<Batch> step_batches;
  for (bool exhausted = false; !exhausted;) {
    step_batches.clear();
    while (static_cast<std::int64_t>(step_batches.size()) < options_.batches_per_step) {
      auto batch = [&] {
        const timeline::Span wait("data", "next batch");
        return strategy_->next_batch(train);
      }();
      if (!batch) {
        exhausted = true;
        break;
      }
      step_batches.push_back(std::move(*batch));
    }
    if (step_batches.empty()) break;
    for (Callback* callback : callbacks) callback->on_batch_begin(*this, step_);
    ++steps;
    const std::string where =
        fmt::format("epoch {}, step {} of {} (step {} overall)", epoch_ + 1, steps, steps_per_epoch, step_ + 1);
    if (!train_step(step_batches, metrics, where)) ++skipped;
    ++step_;
    batches += static_cast<std::int64_t>(step_batches.size());
    const Logs running = metrics.logs();
    progress.update(batches, metrics.samples() * strategy_->shard().world, running);
    for (Callback* callback : callbacks) callback->on_batch_end(*this, step_ - 1, running);
  }
  in_epoch_.metrics = nullptr;
  const double seconds = seconds_since(start);
  DDL_CHECK(batches > 0,
            "fit: the training data gave no batch in epoch {} (rank {} of {}): is the data set smaller "
            "than one batch with drop_last set?",
            epoch_ + 1, strategy_->rank(), strategy_->world_size());
  if (skipped == steps) {
    throw Error(
        fmt::format("fit: every one of the {} steps of epoch {} had a non-finite or diverged "
                    "loss and was skipped: training is not progressing (lower the learning rate?)",
                    steps, epoch_ + 1));
  }
  strategy_->sum_over_ranks(metrics.sums());
  Logs logs = metrics.logs();
  if (options_.on_non_finite == TrainerOptions::OnNonFinite::skip)
    logs.set("skipped_steps", static_cast<double>(skipped));
  logs.set("samples_per_s", seconds > 0.0 ? metrics.samples() / seconds : 0.0);
  return logs;
}

bool Trainer::train_step(const std::vector<Batch>& batches, MetricAccumulator& metrics, const std::string& where) {
  timeline::Span span("training", "step");
  span.arg("step", step_);
  double samples = 0.0;
  for (const Batch& batch : batches) samples += static_cast<double>(batch.size());
  strategy_->begin_step(*model_);
  std::vector<StepOutput> results;
  std::optional<double> step_loss;  // this rank's, where its strategy computes one
  for (std::size_t k = 0; k < batches.size(); ++k) {
    // A rank that reads no data (a parameter server) has empty batches and no loss to scale.
    const StepShare share{.loss_scale = samples > 0.0 ? static_cast<double>(batches[k].size()) / samples : 1.0,
                          .last = k + 1 == batches.size()};
    results.push_back(strategy_->forward_backward(*model_, loss_, batches[k], share));
    if (const Tensor& loss = results.back().loss; loss.defined()) {
      step_loss = step_loss.value_or(0.0) + share.loss_scale * loss.detach().to(cpu()).item();
    }
  }
  strategy_->synchronize_gradients(*model_);
  const std::optional<std::string> problem = step_loss ? loss_guard_.check(*step_loss) : std::nullopt;
  // Agreed over the ranks (one small collective per step), since a loss
  // exists only where a strategy computes one (a pipeline's rank 0 and the
  // rank of its last stage).
  std::vector<double> flags = flags_of(*strategy_, problem.has_value(), problem && std::isfinite(*step_loss));
  strategy_->agree_on_step(flags);
  const FlaggedRanks flagged = flagged_ranks(flags);
  if (flagged.count > 0) {
    const bool diverged = flagged.diverged == flagged.count;
    std::string what =
        fmt::format("{} at {}", problem.value_or(diverged ? "the loss diverged" : "the loss is not finite"), where);
    if (strategy_->world_size() > 1) what += " on " + flagged.describe();
    if (options_.on_non_finite == TrainerOptions::OnNonFinite::stop) {
      const std::string message = fmt::format(
          "fit: {}: training stopped before this step's update, so the model keeps the weights of the step before; "
          "lower the learning rate, or skip such steps",
          what);
      if (diverged) throw DivergedLoss(message, strategy_->is_root());
      throw NonFiniteLoss(message, strategy_->is_root());
    }
    print(fmt::format("Skipped a step: {}", what));
    return false;
  }
  for (std::size_t k = 0; k < batches.size(); ++k) add_metrics(metrics, results[k], batches[k]);
  const timeline::Span update("optimizer", "update");
  strategy_->update(*model_, *optimizer_);
  return true;
}

Logs Trainer::evaluate(BatchSource& data) {
  const timeline::Span span("evaluation", "evaluate");
  ensure_prepared();
  const layers::EvalModeGuard eval_mode(*model_);
  const NoGradGuard no_grad;
  strategy_->begin_epoch(data, 0);
  MetricAccumulator metrics(options_.metrics, options_.classes);
  while (const auto batch = strategy_->next_batch(data)) {
    const StepOutput result = strategy_->forward(*model_, *batch, loss_);
    add_metrics(metrics, result, *batch);
  }
  strategy_->sum_over_ranks(metrics.sums());
  DDL_CHECK(metrics.samples() > 0, "evaluate: no rank computed an output (did the data give no batch?)");
  return metrics.logs();
}

void Trainer::for_each_output(BatchSource& data,
                              const std::function<void(const Tensor& output, const Batch& batch)>& visit) {
  ensure_prepared();
  const layers::EvalModeGuard eval_mode(*model_);
  const NoGradGuard no_grad;
  strategy_->begin_epoch(data, 0);
  bool any_batch = false;
  while (const auto batch = strategy_->next_batch(data)) {
    any_batch = true;
    // Only the rank that reports has outputs (see Strategy::forward).
    if (const Tensor output = strategy_->forward(*model_, *batch).output; output.defined()) visit(output, *batch);
  }
  DDL_CHECK(any_batch, "the data gave no batch to run the model on");
}

Tensor Trainer::predict(BatchSource& data) {
  std::vector<Tensor> outputs;
  for_each_output(data, [&](const Tensor& output, const Batch&) { outputs.push_back(output); });
  if (outputs.empty()) return {};
  return outputs.size() == 1 ? outputs.front() : ddl::concat(outputs);
}

void Trainer::add_metrics(MetricAccumulator& metrics, const StepOutput& result, const Batch& batch) const {
  if (batch.padding == 0 || !result.output.defined()) {
    metrics.add(result.output, batch.targets, result.loss);
    return;
  }
  // The batch's loss is a mean that counts the padding too: the samples of
  // their own get theirs anew (the last batch of a shard only).
  const std::int64_t own = batch.size() - batch.padding;
  if (own == 0) return;
  const NoGradGuard no_grad;
  const Tensor output = ddl::slice(result.output.detach(), 0, own);
  const Tensor targets = ddl::slice(batch.targets, 0, own);
  metrics.add(output, targets, loss_(output, targets));
}

Checkpoint Trainer::make_checkpoint(const TrainingState& state, const std::vector<double>& epoch_sums) const {
  Checkpoint checkpoint;
  add_tensors(checkpoint, "model.", state.model);
  add_tensors(checkpoint, "optimizer.", state.optimizer);
  checkpoint.integers["epoch"] = epoch_;
  checkpoint.integers["step"] = step_;
  checkpoint.integers["rng.seed"] = static_cast<std::int64_t>(generator_->seed());
  checkpoint.integers["rng.offset"] = static_cast<std::int64_t>(generator_->offset());
  if (in_epoch_.batches > 0) {
    checkpoint.integers["epoch.batches"] = in_epoch_.batches;
    checkpoint.integers["epoch.steps"] = in_epoch_.steps;
    checkpoint.integers["epoch.skipped"] = in_epoch_.skipped;
    // Doubles kept exactly, as their bits.
    for (std::size_t i = 0; i < epoch_sums.size(); ++i) {
      checkpoint.integers[fmt::format("epoch.metric_sum.{}", i)] = std::bit_cast<std::int64_t>(epoch_sums[i]);
    }
  }
  checkpoint.strings["optimizer"] = optimizer_->name();
  for (const Callback* callback : active_callbacks_) {
    if (!callback->state_key().empty()) callback->save_state(checkpoint, callback_prefix(*callback));
  }
  return checkpoint;
}

void Trainer::save_checkpoint(const std::string& path) const {
  timeline::Span span("checkpoint", "save checkpoint");
  span.arg("path", path);
  TrainingState state{model_->state_dict(), optimizer_->state()};
  strategy_->gather_state(*model_, state);
  // Non-finite weights never replace a good checkpoint: every rank checks
  // the state it holds once gathered (a strategy that shards its state
  // holds it whole only then) and all agree before anything is written.
  std::string bad = first_non_finite(state.model, "model.");
  if (bad.empty()) bad = first_non_finite(state.optimizer, "optimizer.");
  if (const FlaggedRanks non_finite = flagged_ranks(*strategy_, !bad.empty()); non_finite.count > 0) {
    throw Error(fmt::format(
        "save_checkpoint '{}': not written, since the state to save is not finite ({}); the file there, if any, is "
        "kept",
        path, !bad.empty() ? fmt::format("{} holds NaN or infinity", bad) : "on " + non_finite.describe()));
  }
  // Mid-epoch, the metrics so far: each rank holds its own, the file their total.
  std::vector<double> epoch_sums;
  if (in_epoch_.metrics != nullptr) {
    epoch_sums = in_epoch_.metrics->sums();
    strategy_->sum_over_ranks(epoch_sums);
  }
  // Only the root writes; whether it could is agreed, so that a full disk
  // stops every rank at once rather than leaving the others waiting.
  std::string failure;
  if (strategy_->is_root()) {
    try {
      write_checkpoint_file(path, make_checkpoint(state, epoch_sums));
    } catch (const Error& error) {
      failure = error.what();
    }
  }
  const FlaggedRanks failed = flagged_ranks(*strategy_, !failure.empty());
  if (!failure.empty()) throw Error(failure);
  DDL_CHECK(failed.count == 0, "save_checkpoint '{}': the root rank could not write it (its error says why)", path);
}

void Trainer::load_checkpoint(const std::string& path) {
  Checkpoint checkpoint = read_checkpoint_file(path);
  const auto saved_optimizer = checkpoint.strings.find("optimizer");
  DDL_CHECK(saved_optimizer != checkpoint.strings.end(),
            "checkpoint '{}' is not a Trainer checkpoint: it names no optimizer", path);
  DDL_CHECK(saved_optimizer->second == optimizer_->name(),
            "checkpoint '{}' holds the state of optimizer {}, but this trainer uses {}", path, saved_optimizer->second,
            optimizer_->name());
  const std::int64_t epoch = required_integer(checkpoint, path, "epoch");
  const std::int64_t step = required_integer(checkpoint, path, "step");
  const std::int64_t seed = required_integer(checkpoint, path, "rng.seed");
  const std::int64_t offset = required_integer(checkpoint, path, "rng.offset");
  EpochPosition position;  // a checkpoint taken mid-epoch: how far it got
  if (const auto batches = checkpoint.integers.find("epoch.batches"); batches != checkpoint.integers.end()) {
    position.batches = batches->second;
    position.steps = required_integer(checkpoint, path, "epoch.steps");
    position.skipped = required_integer(checkpoint, path, "epoch.skipped");
    for (std::size_t i = 0;; ++i) {
      const auto sum = checkpoint.integers.find(fmt::format("epoch.metric_sum.{}", i));
      if (sum == checkpoint.integers.end()) break;
      // The total goes to the root alone, since fit() sums over the ranks.
      position.resumed_sums.push_back(strategy_->is_root() ? std::bit_cast<double>(sum->second) : 0.0);
    }
  }

  // Both restores validate before they write; the model is restored first
  // and put back if the optimizer's state then turns out not to fit, so a
  // failed load changes nothing.
  TrainingState saved{tensors_with_prefix(checkpoint, "model."), tensors_with_prefix(checkpoint, "optimizer.")};
  strategy_->select_state(*model_, saved);
  const auto targets = model_->state_dict();
  std::vector<std::pair<std::string, Tensor>> before;
  for (const auto& [name, tensor] : targets) before.emplace_back(name, tensor.detach().clone());
  try {
    layers::copy_by_name("restore_tensors", targets, saved.model,
                         {.name_prefix = "model.", .sources_name = "the checkpoint"});
    try {
      optimizer_->load_state(saved.optimizer);
    } catch (const Error&) {
      for (std::size_t i = 0; i < targets.size(); ++i) targets[i].second.copy_from(before[i].second);
      throw;
    }
  } catch (const Error& error) {
    throw Error(fmt::format("checkpoint '{}' does not fit this trainer: {}", path, error.what()));
  }
  epoch_ = epoch;
  step_ = step;
  in_epoch_ = std::move(position);
  generator_->set_state(static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(offset));
  checkpoint.tensors.clear();
  pending_callback_state_ = std::move(checkpoint);
  prepared_ = false;
}

}  // namespace ddl::optim
