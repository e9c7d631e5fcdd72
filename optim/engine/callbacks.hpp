// The callbacks every training run wants (Keras' ModelCheckpoint,
// EarlyStopping and LearningRateScheduler): they watch the epoch logs and
// save, stop, or set the learning rate. Loggers are in loggers.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/tensor.hpp>
#include <ddl/optim/engine/callback.hpp>
#include <ddl/optim/schedule.hpp>

namespace ddl::optim {

// Whether a monitored metric improves by going down or up; automatic means
// up for names containing "acc" (accuracy) and down for the rest (losses,
// errors), as in Keras.
enum class MonitorMode { automatic, min, max };

// A metric watched for improvement, shared by ModelCheckpoint and EarlyStopping.
class Monitor {
 public:
  Monitor(std::string metric, MonitorMode mode, double min_delta = 0.0);
  // Whether `value` beats `best` by more than min_delta (any value beats none).
  bool improves(double value, std::optional<double> best) const;
  // The metric's value in `logs`; throws ddl::Error listing the names the logs
  // hold when it is absent (a typo, or "val_" metrics without validation data).
  double value_in(const Logs& logs, const char* who) const;
  const std::string& metric() const { return metric_; }

 private:
  std::string metric_;
  bool maximise_;
  double min_delta_;
};

struct ModelCheckpointOptions {
  std::string directory{};            // created if missing
  bool save_last = true;              // <directory>/last.ckpt after every epoch
  bool save_best = true;              // <directory>/best.ckpt when `monitor` improves
  std::string monitor = "val_loss";   // the metric "best" refers to
  MonitorMode mode = MonitorMode::automatic;
  std::int64_t keep_every = 0;        // also <directory>/epoch-<k>.ckpt every k epochs (0: never)
  // Also last.ckpt every this many optimizer steps (0: never), mid-epoch
  // too: a resume from it continues bit for bit (Trainer::load_checkpoint).
  std::int64_t every_steps = 0;
};

// Saves Trainer checkpoints (Trainer::save_checkpoint) at the end of epochs,
// and every `every_steps` steps.
// Runs after every other callback and on every rank: only the root writes,
// but a strategy may first gather state from the other ranks (the
// parameter server's optimizer state), and every rank decides alike since
// the monitored metrics are reduced over the ranks.
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options);
  // Creates the directory, checks that a file can be written there, and
  // removes the temp files of writers killed mid-write (returning their
  // paths); throws ddl::Error naming the directory. on_train_begin calls
  // it; call it before on the root to find a problem before training.
  std::vector<std::string> prepare_directory() const;
  void on_train_begin(Trainer& trainer) override;
  void on_batch_end(Trainer& trainer, std::int64_t step, const Logs& logs) override;
  void on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) override;
  bool saves_checkpoints() const override { return true; }
  std::string state_key() const override { return "model_checkpoint"; }
  void save_state(Checkpoint& checkpoint, const std::string& prefix) const override;
  void load_state(const Checkpoint& checkpoint, const std::string& prefix) override;

  std::string last_path() const;
  std::string best_path() const;
  std::optional<double> best() const { return best_; }

 private:
  ModelCheckpointOptions options_;
  Monitor monitor_;
  std::optional<double> best_;
};

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  MonitorMode mode = MonitorMode::automatic;
  double min_delta = 0.0;   // smaller changes do not count as improvement
  std::int64_t patience = 3;  // epochs without improvement before stopping (>= 1)
  // At the end of training, put back the weights of the best epoch seen by
  // this process (not across a resume: weights are not kept in checkpoints).
  // A copy of the whole model, on every rank: under sharded parameters too
  // (Strategy::whole_parameters gathers them to read and to restore, a
  // collective: monitor a metric the ranks agree on, not time_s).
  bool restore_best_weights = false;
};

// Stops training when the monitored metric has not improved for `patience`
// epochs. Metrics are averaged over ranks, so every rank stops together.
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) override;
  void on_train_end(Trainer& trainer) override;
  std::string state_key() const override { return "early_stopping"; }
  void save_state(Checkpoint& checkpoint, const std::string& prefix) const override;
  void load_state(const Checkpoint& checkpoint, const std::string& prefix) override;

  // The 0-based epoch after which training stopped, if it did.
  std::optional<std::int64_t> stopped_epoch() const { return stopped_epoch_; }

 private:
  EarlyStoppingOptions options_;
  Monitor monitor_;
  std::optional<double> best_;
  std::int64_t epochs_without_improvement_ = 0;
  std::optional<std::int64_t> stopped_epoch_;
  std::vector<std::pair<std::string, Tensor>> best_weights_;
};

// Sets the optimizer's learning rate from a schedule before every epoch
// (the schedule's argument is the 0-based epoch) or before every step (the
// argument is the global optimizer step, which suits warm-up).
class LrScheduler : public Callback {
 public:
  enum class Unit { epoch, step };
  explicit LrScheduler(std::shared_ptr<const LrSchedule> schedule, Unit unit = Unit::epoch);
  void on_epoch_begin(Trainer& trainer, std::int64_t epoch) override;
  void on_batch_begin(Trainer& trainer, std::int64_t step) override;

 private:
  std::shared_ptr<const LrSchedule> schedule_;
  Unit unit_;
};

}  // namespace ddl::optim
