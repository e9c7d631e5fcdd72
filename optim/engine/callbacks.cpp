// ModelCheckpoint, EarlyStopping and LrScheduler (see callbacks.hpp).
#include <ddl/optim/engine/callbacks.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <ddl/core/check.hpp>
#include <ddl/optim/engine/checkpoint.hpp>
#include <ddl/optim/engine/trainer.hpp>

namespace ddl::optim {
namespace {

bool maximises(const std::string& metric, MonitorMode mode) {
  if (mode == MonitorMode::automatic) return metric.find("acc") != std::string::npos;
  return mode == MonitorMode::max;
}

// A best value kept in a checkpoint's strings, exactly ("%.17g" round-trips a
// double); an absent best is an empty string.
void save_best(Checkpoint& checkpoint, const std::string& key, std::optional<double> best) {
  checkpoint.strings[key] = best ? fmt::format("{:.17g}", *best) : std::string();
}

std::optional<double> load_best(const Checkpoint& checkpoint, const std::string& key) {
  const auto found = checkpoint.strings.find(key);
  if (found == checkpoint.strings.end() || found->second.empty()) return std::nullopt;
  try {
    return std::stod(found->second);
  } catch (const std::exception&) {
    throw Error(fmt::format("checkpoint entry '{}' is not a number: '{}'", key, found->second));
  }
}

}  // namespace

Monitor::Monitor(std::string metric, MonitorMode mode, double min_delta)
    : metric_(std::move(metric)), maximise_(maximises(metric_, mode)), min_delta_(min_delta) {
  DDL_CHECK(!metric_.empty(), "the monitored metric's name is empty");
  DDL_CHECK(min_delta_ >= 0.0, "monitor '{}': min_delta must be >= 0, got {}", metric_, min_delta_);
}

bool Monitor::improves(double value, std::optional<double> best) const {
  if (std::isnan(value)) return false;
  if (!best) return true;
  return maximise_ ? value > *best + min_delta_ : value < *best - min_delta_;
}

double Monitor::value_in(const Logs& logs, const char* who) const {
  if (const auto value = logs.get(metric_)) return *value;
  throw Error(fmt::format("{}: monitors '{}', which the epoch logs do not hold (they hold: {}); \"val_\" metrics "
                          "need validation data",
                          who, metric_, fmt::join(logs.names(), ", ")));
}

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : options_(std::move(options)), monitor_(options_.monitor, options_.mode) {
  DDL_CHECK(!options_.directory.empty(), "ModelCheckpoint: the directory is empty");
  DDL_CHECK(options_.keep_every >= 0, "ModelCheckpoint: keep_every must be >= 0, got {}", options_.keep_every);
  DDL_CHECK(options_.every_steps >= 0, "ModelCheckpoint: every_steps must be >= 0, got {}", options_.every_steps);
}

std::string ModelCheckpoint::last_path() const { return (std::filesystem::path(options_.directory) / "last.ckpt").string(); }
std::string ModelCheckpoint::best_path() const { return (std::filesystem::path(options_.directory) / "best.ckpt").string(); }

std::vector<std::string> ModelCheckpoint::prepare_directory() const {
  std::error_code error;
  std::filesystem::create_directories(options_.directory, error);
  DDL_CHECK(!error, "ModelCheckpoint: cannot create the directory '{}': {}", options_.directory, error.message());
  // A probe written and removed now, rather than a failure after the first
  // epoch's work.
  const std::string probe = checkpoint_temp_path((std::filesystem::path(options_.directory) / "probe").string());
  {
    std::ofstream file(probe);
    file << "ddl";
    file.flush();
    DDL_CHECK(file.good(), "ModelCheckpoint: cannot write in the directory '{}': {}", options_.directory,
              std::strerror(errno));
  }
  std::filesystem::remove(probe, error);
  return remove_stale_temp_files(options_.directory);
}

void ModelCheckpoint::on_train_begin(Trainer& trainer) {
  const std::vector<std::string> stale = prepare_directory();
  if (!stale.empty()) {
    trainer.print(fmt::format("Removed {} temporary checkpoint file(s) that killed runs left: {}", stale.size(),
                              fmt::join(stale, ", ")));
  }
}

void ModelCheckpoint::on_batch_end(Trainer& trainer, std::int64_t step, const Logs& /*logs*/) {
  if (options_.every_steps > 0 && (step + 1) % options_.every_steps == 0) trainer.save_checkpoint(last_path());
}

void ModelCheckpoint::on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) {
  if (options_.save_best) {
    const double value = monitor_.value_in(logs, "ModelCheckpoint");
    if (monitor_.improves(value, best_)) {
      const std::string from = best_ ? fmt::format("{:.4f}", *best_) : std::string("none");
      best_ = value;
      trainer.save_checkpoint(best_path());
      trainer.print(fmt::format("Epoch {}: {} improved from {} to {:.4f}, saved {}", epoch + 1, monitor_.metric(),
                                from, value, best_path()));
    }
  }
  if (options_.save_last) trainer.save_checkpoint(last_path());
  if (options_.keep_every > 0 && (epoch + 1) % options_.keep_every == 0) {
    const auto path = std::filesystem::path(options_.directory) / fmt::format("epoch-{:04}.ckpt", epoch + 1);
    trainer.save_checkpoint(path.string());
  }
}

void ModelCheckpoint::save_state(Checkpoint& checkpoint, const std::string& prefix) const {
  save_best(checkpoint, prefix + "best", best_);
}

void ModelCheckpoint::load_state(const Checkpoint& checkpoint, const std::string& prefix) {
  best_ = load_best(checkpoint, prefix + "best");
}

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : options_(std::move(options)), monitor_(options_.monitor, options_.mode, options_.min_delta) {
  DDL_CHECK(options_.patience >= 1, "EarlyStopping: patience must be >= 1, got {}", options_.patience);
}

void EarlyStopping::on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) {
  const double value = monitor_.value_in(logs, "EarlyStopping");
  if (monitor_.improves(value, best_)) {
    best_ = value;
    epochs_without_improvement_ = 0;
    if (options_.restore_best_weights) {
      best_weights_.clear();
      trainer.strategy().whole_parameters(trainer.model());
      for (const auto& [name, tensor] : trainer.model().named_parameters()) {
        best_weights_.emplace_back(name, tensor.detach().clone());
      }
    }
    return;
  }
  if (++epochs_without_improvement_ < options_.patience) return;
  stopped_epoch_ = epoch;
  trainer.request_stop();
  trainer.print(fmt::format("Epoch {}: early stopping, {} has not improved on {:.4f} for {} epochs", epoch + 1,
                            monitor_.metric(), best_.value_or(NAN), epochs_without_improvement_));
}

void EarlyStopping::on_train_end(Trainer& trainer) {
  if (best_weights_.empty()) return;
  trainer.strategy().whole_parameters(trainer.model());
  const auto parameters = trainer.model().named_parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i].second.copy_from(best_weights_[i].second);
  trainer.print(fmt::format("Restored the weights of the best epoch ({} = {:.4f})", monitor_.metric(), *best_));
}

void EarlyStopping::save_state(Checkpoint& checkpoint, const std::string& prefix) const {
  save_best(checkpoint, prefix + "best", best_);
  checkpoint.integers[prefix + "epochs_without_improvement"] = epochs_without_improvement_;
}

void EarlyStopping::load_state(const Checkpoint& checkpoint, const std::string& prefix) {
  best_ = load_best(checkpoint, prefix + "best");
  const auto found = checkpoint.integers.find(prefix + "epochs_without_improvement");
  epochs_without_improvement_ = found != checkpoint.integers.end() ? found->second : 0;
}

LrScheduler::LrScheduler(std::shared_ptr<const LrSchedule> schedule, Unit unit)
    : schedule_(std::move(schedule)), unit_(unit) {
  DDL_CHECK(schedule_ != nullptr, "LrScheduler: the schedule is null");
}

void LrScheduler::on_epoch_begin(Trainer& trainer, std::int64_t epoch) {
  if (unit_ == Unit::epoch) schedule_->apply(trainer.optimizer(), epoch);
}

void LrScheduler::on_batch_begin(Trainer& trainer, std::int64_t step) {
  if (unit_ == Unit::step) schedule_->apply(trainer.optimizer(), step);
}

}  // namespace ddl::optim
