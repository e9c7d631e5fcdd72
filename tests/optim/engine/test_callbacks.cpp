// The Trainer's callbacks (optim/engine/callback.hpp, callbacks.hpp, loggers.hpp):
// the order hooks run in, Monitor's notion of improvement, EarlyStopping,
// ModelCheckpoint and their state across a resume, LrScheduler, and the CSV
// and JSON-lines loggers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/optim/adam.hpp>
#include <ddl/optim/engine/callbacks.hpp>
#include <ddl/optim/engine/checkpoint.hpp>
#include <ddl/optim/engine/loggers.hpp>
#include <ddl/optim/engine/trainer.hpp>
#include <ddl/optim/schedule.hpp>
#include <ddl/optim/sgd.hpp>

#include "engine_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::optim::EarlyStopping;
using ddl::optim::Logs;
using ddl::optim::ModelCheckpoint;
using ddl::optim::Monitor;
using ddl::optim::MonitorMode;
using ddl::optim::Trainer;
using ddl::test::flat_parameters;
using ddl::test::quiet_options;
using ddl::test::TempDir;
using ddl::test::TensorBatches;
using ddl::test::throws_error_mentioning;

namespace {

// Epoch lines and callback messages written to `out`.
optim::TrainerOptions printing_to(std::ostream& out) {
  optim::TrainerOptions options = quiet_options();
  options.verbosity = optim::Verbosity::epoch_lines;
  options.out = &out;
  return options;
}

std::shared_ptr<optim::SGD> sgd(const std::shared_ptr<layers::Sequential>& model, double lr) {
  return std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = lr});
}

// 30 samples in batches of 10: three batches per epoch.
struct Problem {
  test::Blobs data = test::make_blobs(30, 3);
  TensorBatches batches{data.inputs, data.labels, 10};
};

// A callback that runs the functions a test gives it.
class Hooks : public optim::Callback {
 public:
  std::function<void(Trainer&)> train_begin, train_end;
  std::function<void(Trainer&, std::int64_t)> epoch_begin, batch_begin;
  std::function<void(Trainer&, std::int64_t, const Logs&)> batch_end, epoch_end;
  bool writes_checkpoints = false;

  void on_train_begin(Trainer& trainer) override {
    if (train_begin) train_begin(trainer);
  }
  void on_epoch_begin(Trainer& trainer, std::int64_t epoch) override {
    if (epoch_begin) epoch_begin(trainer, epoch);
  }
  void on_batch_begin(Trainer& trainer, std::int64_t step) override {
    if (batch_begin) batch_begin(trainer, step);
  }
  void on_batch_end(Trainer& trainer, std::int64_t step, const Logs& logs) override {
    if (batch_end) batch_end(trainer, step, logs);
  }
  void on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) override {
    if (epoch_end) epoch_end(trainer, epoch, logs);
  }
  void on_train_end(Trainer& trainer) override {
    if (train_end) train_end(trainer);
  }
  bool saves_checkpoints() const override { return writes_checkpoints; }
};

// A loss whose epoch values the test scripts: cross-entropy plus
// offsets[epoch]. With SGD at lr 0 the model never changes, so an epoch's
// "loss" is a constant plus its offset. It learns the epoch as a callback,
// so it must be among the fit's callbacks.
class ScriptedLoss : public optim::Callback {
 public:
  explicit ScriptedLoss(std::vector<float> offsets) : offsets_(std::move(offsets)) {}
  void on_epoch_begin(Trainer& /*trainer*/, std::int64_t epoch) override { epoch_ = epoch; }
  optim::LossFunction function() {
    return [this](const Tensor& output, const Tensor& target) {
      return layers::cross_entropy(output, target) + offsets_.at(static_cast<std::size_t>(epoch_));
    };
  }

 private:
  std::vector<float> offsets_;
  std::int64_t epoch_ = 0;
};

// The "epoch" a Trainer checkpoint was saved after.
std::int64_t saved_epoch(const std::string& path) { return optim::read_checkpoint_file(path).integers.at("epoch"); }

std::vector<std::string> names_of(const Logs& logs) {
  std::vector<std::string> names;
  for (const auto& entry : logs) names.push_back(entry.first);
  return names;
}

std::vector<std::string> entries_of(const std::filesystem::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream file(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  for (std::string cell; std::getline(stream, cell, ',');) cells.push_back(cell);
  return cells;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

// Each CSV row parses back to its epoch's logs; values are written with 9
// significant digits.
void check_rows_match(const std::vector<std::string>& rows, const std::vector<std::string>& columns,
                      const optim::History& history) {
  REQUIRE(rows.size() == history.epochs.size());
  for (std::size_t e = 0; e < rows.size(); ++e) {
    const auto cells = cells_of(rows[e]);
    REQUIRE(cells.size() == columns.size());
    for (std::size_t c = 0; c < columns.size(); ++c) {
      CAPTURE(e);
      CAPTURE(columns[c]);
      CHECK(std::stod(cells[c]) == doctest::Approx(history.epochs[e].at(columns[c])).epsilon(1e-8));
    }
  }
}

}  // namespace

// ---- The order of the hooks ----

TEST_CASE("Callbacks: hooks run as train begin, epoch begin, batch begin and end per batch, epoch end, train end") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  std::vector<std::string> calls;
  auto recorder = std::make_shared<Hooks>();
  recorder->train_begin = [&](Trainer&) { calls.push_back("train_begin"); };
  recorder->epoch_begin = [&](Trainer&, std::int64_t epoch) { calls.push_back(fmt::format("epoch_begin {}", epoch)); };
  recorder->batch_begin = [&](Trainer&, std::int64_t step) { calls.push_back(fmt::format("batch_begin {}", step)); };
  recorder->batch_end = [&](Trainer&, std::int64_t step, const Logs&) {
    calls.push_back(fmt::format("batch_end {}", step));
  };
  recorder->epoch_end = [&](Trainer&, std::int64_t epoch, const Logs&) {
    calls.push_back(fmt::format("epoch_end {}", epoch));
  };
  recorder->train_end = [&](Trainer&) { calls.push_back("train_end"); };
  trainer.fit(problem.batches, {.epochs = 2, .callbacks = {recorder}});

  CHECK(calls == std::vector<std::string>{"train_begin", "epoch_begin 0", "batch_begin 0", "batch_end 0",
                                          "batch_begin 1", "batch_end 1", "batch_begin 2", "batch_end 2", "epoch_end 0",
                                          "epoch_begin 1", "batch_begin 3", "batch_end 3", "batch_begin 4",
                                          "batch_end 4", "batch_begin 5", "batch_end 5", "epoch_end 1", "train_end"});
}

TEST_CASE("Callbacks: batch end gets the running loss and metrics, epoch end the logs History records") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  std::vector<std::vector<std::string>> batch_names;
  std::vector<Logs> epoch_logs;
  auto recorder = std::make_shared<Hooks>();
  recorder->batch_end = [&](Trainer&, std::int64_t, const Logs& logs) { batch_names.push_back(names_of(logs)); };
  recorder->epoch_end = [&](Trainer&, std::int64_t, const Logs& logs) { epoch_logs.push_back(logs); };
  const optim::History history = trainer.fit(problem.batches, {.epochs = 2, .callbacks = {recorder}});

  CHECK(batch_names == std::vector<std::vector<std::string>>(6, {"loss", "accuracy"}));
  REQUIRE(epoch_logs.size() == 2);
  for (std::size_t e = 0; e < 2; ++e) CHECK(epoch_logs[e].entries() == history.epochs[e].entries());
}

TEST_CASE("Callbacks: checkpoint-saving callbacks run after the others at an epoch's end, whatever the list order") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  std::vector<std::string> calls;
  auto writer = std::make_shared<Hooks>();
  writer->writes_checkpoints = true;
  writer->epoch_end = [&](Trainer&, std::int64_t epoch, const Logs&) {
    calls.push_back(fmt::format("writer {}", epoch));
  };
  auto first = std::make_shared<Hooks>();
  first->epoch_end = [&](Trainer&, std::int64_t epoch, const Logs&) {
    calls.push_back(fmt::format("first {}", epoch));
  };
  auto second = std::make_shared<Hooks>();
  second->epoch_end = [&](Trainer&, std::int64_t epoch, const Logs&) {
    calls.push_back(fmt::format("second {}", epoch));
  };
  trainer.fit(problem.batches, {.epochs = 2, .callbacks = {writer, first, second}});
  CHECK(calls == std::vector<std::string>{"first 0", "second 0", "writer 0", "first 1", "second 1", "writer 1"});
}

TEST_CASE("Callbacks: a checkpoint holds the other callbacks' state of the epoch it was saved at") {
  Problem problem;
  TempDir dir("callbacks");
  auto scripted = std::make_shared<ScriptedLoss>(std::vector<float>{0, 1});
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, scripted->function(), sgd(model, 0.0), quiet_options());
  // Listed before EarlyStopping, ModelCheckpoint still saves after it has
  // counted the second epoch as one without improvement.
  auto checkpoint = std::make_shared<ModelCheckpoint>(
      optim::ModelCheckpointOptions{.directory = dir.path.string(), .save_best = false, .monitor = "loss"});
  auto stopping = std::make_shared<EarlyStopping>(optim::EarlyStoppingOptions{.monitor = "loss", .patience = 5});
  const optim::History history =
      trainer.fit(problem.batches, {.epochs = 2, .callbacks = {scripted, checkpoint, stopping}});

  const optim::Checkpoint saved = optim::read_checkpoint_file(checkpoint->last_path());
  CHECK(saved.integers.at("callback.early_stopping.epochs_without_improvement") == 1);
  CHECK(std::stod(saved.strings.at("callback.early_stopping.best")) == history.epochs[0].at("loss"));
}

// ---- Monitor ----

TEST_CASE("Callbacks: Monitor in automatic mode maximises names containing acc and minimises the rest") {
  for (const char* name : {"accuracy", "val_accuracy", "top5_acc"}) {
    CAPTURE(name);
    const Monitor monitor(name, MonitorMode::automatic);
    CHECK(monitor.improves(0.9, 0.8));
    CHECK_FALSE(monitor.improves(0.7, 0.8));
  }
  for (const char* name : {"loss", "val_loss", "mae"}) {
    CAPTURE(name);
    const Monitor monitor(name, MonitorMode::automatic);
    CHECK(monitor.improves(0.7, 0.8));
    CHECK_FALSE(monitor.improves(0.9, 0.8));
  }
}

TEST_CASE("Callbacks: Monitor's explicit mode overrides what the name suggests") {
  const Monitor minimised("accuracy", MonitorMode::min);
  CHECK(minimised.improves(0.7, 0.8));
  CHECK_FALSE(minimised.improves(0.9, 0.8));
  const Monitor maximised("loss", MonitorMode::max);
  CHECK(maximised.improves(0.9, 0.8));
  CHECK_FALSE(maximised.improves(0.7, 0.8));
}

TEST_CASE("Callbacks: Monitor counts only changes larger than min_delta as improvement") {
  const Monitor minimised("loss", MonitorMode::min, 0.25);
  CHECK_FALSE(minimised.improves(0.875, 1.0));
  CHECK_FALSE(minimised.improves(0.75, 1.0));
  CHECK(minimised.improves(0.625, 1.0));
  const Monitor maximised("accuracy", MonitorMode::max, 0.25);
  CHECK_FALSE(maximised.improves(1.125, 1.0));
  CHECK_FALSE(maximised.improves(1.25, 1.0));
  CHECK(maximised.improves(1.375, 1.0));
  // An equal value is no improvement, even with min_delta 0.
  CHECK_FALSE(Monitor("loss", MonitorMode::min).improves(1.0, 1.0));
  CHECK_FALSE(Monitor("accuracy", MonitorMode::max).improves(1.0, 1.0));
}

TEST_CASE("Callbacks: Monitor takes any value as an improvement on none, except NaN, which never improves") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const MonitorMode mode : {MonitorMode::min, MonitorMode::max}) {
    const Monitor monitor("loss", mode, 0.1);
    CHECK(monitor.improves(123.0, std::nullopt));
    CHECK(monitor.improves(std::numeric_limits<double>::infinity(), std::nullopt));
    CHECK_FALSE(monitor.improves(nan, std::nullopt));
    CHECK_FALSE(monitor.improves(nan, 1.0));
  }
}

TEST_CASE("Callbacks: Monitor rejects an empty name and a negative min_delta") {
  CHECK(throws_error_mentioning([] { Monitor("", MonitorMode::min); }, {"empty"}));
  CHECK(throws_error_mentioning([] { Monitor("loss", MonitorMode::min, -0.1); }, {"loss", "min_delta"}));
}

TEST_CASE("Callbacks: monitoring a metric the epoch logs lack is an error listing the names present") {
  Logs logs;
  logs.set("epoch", 1);
  logs.set("loss", 0.5);
  CHECK(throws_error_mentioning([&] { Monitor("val_loss", MonitorMode::automatic).value_in(logs, "Somebody"); },
                                {"Somebody", "'val_loss'", "epoch, loss", "\"val_\"", "validation data"}));
  CHECK(Monitor("loss", MonitorMode::automatic).value_in(logs, "Somebody") == 0.5);

  // The default monitor, val_loss, in a fit without validation data.
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  CHECK(throws_error_mentioning(
      [&] { trainer.fit(problem.batches, {.epochs = 1, .callbacks = {std::make_shared<EarlyStopping>()}}); },
      {"EarlyStopping", "'val_loss'", "epoch, loss, accuracy, lr, time_s, samples_per_s", "\"val_\""}));
  TempDir dir("callbacks");
  auto checkpoint = std::make_shared<ModelCheckpoint>(optim::ModelCheckpointOptions{.directory = dir.path.string()});
  CHECK(throws_error_mentioning([&] { trainer.fit(problem.batches, {.epochs = 2, .callbacks = {checkpoint}}); },
                                {"ModelCheckpoint", "'val_loss'", "epoch, loss", "\"val_\""}));
}

// ---- EarlyStopping ----

TEST_CASE("Callbacks: EarlyStopping stops training after patience epochs without improvement") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.0), quiet_options());  // lr 0: the loss never improves
  auto stopping = std::make_shared<EarlyStopping>(optim::EarlyStoppingOptions{.monitor = "loss", .patience = 2});
  const optim::History history = trainer.fit(problem.batches, {.epochs = 10, .callbacks = {stopping}});

  const auto loss = history.series("loss");
  REQUIRE(loss.size() == 3);
  CHECK(loss[1] == loss[0]);
  CHECK(trainer.epoch() == 3);
  CHECK(stopping->stopped_epoch() == 2);
}

TEST_CASE("Callbacks: EarlyStopping reports where progress goes when it stops") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  std::ostringstream out;
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.0), printing_to(out));
  auto stopping = std::make_shared<EarlyStopping>(optim::EarlyStoppingOptions{.monitor = "loss", .patience = 1});
  trainer.fit(problem.batches, {.epochs = 10, .callbacks = {stopping}});
  CHECK(out.str().find("Epoch 2: early stopping, loss has not improved on ") != std::string::npos);
  CHECK(out.str().find(" for 1 epochs") != std::string::npos);
}

TEST_CASE("Callbacks: EarlyStopping does not stop while the monitored metric keeps improving") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy,
                  std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 0.01}), quiet_options());
  auto stopping =
      std::make_shared<EarlyStopping>(optim::EarlyStoppingOptions{.monitor = "loss", .min_delta = 0.0, .patience = 1});
  const optim::History history = trainer.fit(problem.batches, {.epochs = 6, .callbacks = {stopping}});

  const auto loss = history.series("loss");
  REQUIRE(loss.size() == 6);
  for (std::size_t e = 1; e < loss.size(); ++e) {
    CAPTURE(e);
    REQUIRE(loss[e] < loss[e - 1]);  // the premise: Adam improves the loss every epoch
  }
  CHECK_FALSE(stopping->stopped_epoch().has_value());
}

TEST_CASE("Callbacks: EarlyStopping with min_delta stops when improvements are too small") {
  Problem problem;
  auto scripted = std::make_shared<ScriptedLoss>(std::vector<float>{0, -0.25f, -0.375f, -0.75f, -1, -1.25f});
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, scripted->function(), sgd(model, 0.0), quiet_options());
  auto stopping =
      std::make_shared<EarlyStopping>(optim::EarlyStoppingOptions{.monitor = "loss", .min_delta = 0.5, .patience = 2});
  const optim::History history = trainer.fit(problem.batches, {.epochs = 6, .callbacks = {scripted, stopping}});
  CHECK(history.epochs.size() == 3);
  CHECK(stopping->stopped_epoch() == 2);
}

TEST_CASE("Callbacks: EarlyStopping with restore_best_weights puts back the weights of the best epoch") {
  Problem problem;
  // Epoch 1 is best by far; training goes on changing the weights (lr 0.1).
  auto scripted = std::make_shared<ScriptedLoss>(std::vector<float>{0, -10, 0, 0, 0});
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, scripted->function(), sgd(model, 0.1), quiet_options());
  std::vector<std::vector<float>> weights_after_epoch;
  auto snapshots = std::make_shared<Hooks>();
  snapshots->epoch_end = [&](Trainer& t, std::int64_t, const Logs&) {
    weights_after_epoch.push_back(flat_parameters(t.model()));
  };
  auto stopping = std::make_shared<EarlyStopping>(
      optim::EarlyStoppingOptions{.monitor = "loss", .patience = 3, .restore_best_weights = true});
  trainer.fit(problem.batches, {.epochs = 5, .callbacks = {scripted, snapshots, stopping}});

  REQUIRE(weights_after_epoch.size() == 5);
  CHECK(stopping->stopped_epoch() == 4);
  REQUIRE(weights_after_epoch[4] != weights_after_epoch[1]);
  CHECK(flat_parameters(*model) == weights_after_epoch[1]);
}

TEST_CASE("Callbacks: EarlyStopping without restore_best_weights leaves the last epoch's weights") {
  Problem problem;
  auto scripted = std::make_shared<ScriptedLoss>(std::vector<float>{0, -10, 0, 0, 0});
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, scripted->function(), sgd(model, 0.1), quiet_options());
  std::vector<float> last_weights;
  auto snapshots = std::make_shared<Hooks>();
  snapshots->epoch_end = [&](Trainer& t, std::int64_t, const Logs&) { last_weights = flat_parameters(t.model()); };
  auto stopping = std::make_shared<EarlyStopping>(optim::EarlyStoppingOptions{.monitor = "loss", .patience = 3});
  trainer.fit(problem.batches, {.epochs = 5, .callbacks = {scripted, snapshots, stopping}});
  CHECK(flat_parameters(*model) == last_weights);
}

TEST_CASE("Callbacks: EarlyStopping rejects a patience below 1") {
  CHECK(throws_error_mentioning([] { EarlyStopping(optim::EarlyStoppingOptions{.patience = 0}); },
                                {"EarlyStopping", "patience", "0"}));
}

// ---- ModelCheckpoint ----

TEST_CASE("Callbacks: ModelCheckpoint writes last.ckpt after every epoch") {
  Problem problem;
  TempDir dir("callbacks");
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  auto checkpoint = std::make_shared<ModelCheckpoint>(
      optim::ModelCheckpointOptions{.directory = dir.path.string(), .monitor = "loss"});
  std::vector<std::int64_t> seen;
  auto probe = std::make_shared<Hooks>();
  probe->epoch_begin = [&](Trainer&, std::int64_t epoch) {
    if (epoch > 0) seen.push_back(saved_epoch(checkpoint->last_path()));
  };
  trainer.fit(problem.batches, {.epochs = 3, .callbacks = {checkpoint, probe}});
  seen.push_back(saved_epoch(checkpoint->last_path()));
  CHECK(checkpoint->last_path() == dir.file("last.ckpt"));
  CHECK(seen == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("Callbacks: ModelCheckpoint rewrites best.ckpt only when the monitored metric improves") {
  Problem problem;
  TempDir dir("callbacks");
  auto scripted = std::make_shared<ScriptedLoss>(std::vector<float>{0, -1, 1, -2, -0.5f});
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, scripted->function(), sgd(model, 0.0), quiet_options());
  auto checkpoint = std::make_shared<ModelCheckpoint>(
      optim::ModelCheckpointOptions{.directory = dir.path.string(), .monitor = "loss"});
  std::vector<std::int64_t> best_epochs;
  auto probe = std::make_shared<Hooks>();
  probe->epoch_begin = [&](Trainer&, std::int64_t epoch) {
    if (epoch > 0) best_epochs.push_back(saved_epoch(checkpoint->best_path()));
  };
  const optim::History history =
      trainer.fit(problem.batches, {.epochs = 5, .callbacks = {scripted, checkpoint, probe}});
  best_epochs.push_back(saved_epoch(checkpoint->best_path()));

  CHECK(checkpoint->best_path() == dir.file("best.ckpt"));
  CHECK(best_epochs == std::vector<std::int64_t>{1, 2, 2, 4, 4});
  CHECK(checkpoint->best() == history.epochs[3].at("loss"));
}

TEST_CASE("Callbacks: ModelCheckpoint reports each improvement where progress goes") {
  Problem problem;
  TempDir dir("callbacks");
  auto scripted = std::make_shared<ScriptedLoss>(std::vector<float>{0, -1, 1});
  auto model = test::make_classifier(7, false);
  std::ostringstream out;
  Trainer trainer(model, scripted->function(), sgd(model, 0.0), printing_to(out));
  auto checkpoint = std::make_shared<ModelCheckpoint>(
      optim::ModelCheckpointOptions{.directory = dir.path.string(), .monitor = "loss"});
  trainer.fit(problem.batches, {.epochs = 3, .callbacks = {scripted, checkpoint}});
  const std::string text = out.str();
  CHECK(text.find("Epoch 1: loss improved from none to ") != std::string::npos);
  CHECK(text.find("Epoch 2: loss improved from ") != std::string::npos);
  CHECK(text.find("Epoch 3: loss improved") == std::string::npos);
  CHECK(text.find("saved " + checkpoint->best_path()) != std::string::npos);
}

TEST_CASE("Callbacks: ModelCheckpoint keeps epoch-<k>.ckpt every keep_every epochs") {
  Problem problem;
  TempDir dir("callbacks");
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  auto checkpoint = std::make_shared<ModelCheckpoint>(
      optim::ModelCheckpointOptions{.directory = dir.path.string(), .monitor = "loss", .keep_every = 2});
  trainer.fit(problem.batches, {.epochs = 5, .callbacks = {checkpoint}});
  CHECK(dir.entries() == std::vector<std::string>{"best.ckpt", "epoch-0002.ckpt", "epoch-0004.ckpt", "last.ckpt"});
  CHECK(saved_epoch(dir.file("epoch-0002.ckpt")) == 2);
  CHECK(saved_epoch(dir.file("epoch-0004.ckpt")) == 4);
}

TEST_CASE("Callbacks: ModelCheckpoint writes only the files its options ask for") {
  Problem problem;
  TempDir dir("callbacks");
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  // Without save_best the monitor (val_loss, absent here) is never read.
  auto last_only = std::make_shared<ModelCheckpoint>(
      optim::ModelCheckpointOptions{.directory = (dir.path / "last").string(), .save_best = false});
  auto best_only = std::make_shared<ModelCheckpoint>(
      optim::ModelCheckpointOptions{.directory = (dir.path / "best").string(), .save_last = false, .monitor = "loss"});
  trainer.fit(problem.batches, {.epochs = 2, .callbacks = {last_only, best_only}});
  CHECK(entries_of(dir.path / "last") == std::vector<std::string>{"last.ckpt"});
  CHECK(entries_of(dir.path / "best") == std::vector<std::string>{"best.ckpt"});
}

TEST_CASE("Callbacks: ModelCheckpoint creates its directory and missing parents") {
  Problem problem;
  TempDir dir("callbacks");
  const std::filesystem::path nested = dir.path / "runs" / "a" / "checkpoints";
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  auto checkpoint =
      std::make_shared<ModelCheckpoint>(optim::ModelCheckpointOptions{.directory = nested.string(), .monitor = "loss"});
  trainer.fit(problem.batches, {.epochs = 1, .callbacks = {checkpoint}});
  CHECK(entries_of(nested) == std::vector<std::string>{"best.ckpt", "last.ckpt"});
}

TEST_CASE("Callbacks: ModelCheckpoint with a directory it cannot create is an error naming it") {
  Problem problem;
  TempDir dir("callbacks");
  std::ofstream(dir.file("plain_file")) << "not a directory";
  const std::string impossible = (dir.path / "plain_file" / "checkpoints").string();
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  auto checkpoint =
      std::make_shared<ModelCheckpoint>(optim::ModelCheckpointOptions{.directory = impossible, .monitor = "loss"});
  CHECK(throws_error_mentioning([&] { trainer.fit(problem.batches, {.epochs = 1, .callbacks = {checkpoint}}); },
                                {"ModelCheckpoint", "'" + impossible + "'"}));
}

TEST_CASE("Callbacks: ModelCheckpoint and EarlyStopping resume with the best value and patience count they saved") {
  Problem problem;
  TempDir dir("callbacks");
  // Epoch 0 is best; epochs 1 and 2 are not improvements.
  auto scripted = std::make_shared<ScriptedLoss>(std::vector<float>{0, 1, 1, 1, 1});
  const auto checkpoint_options = optim::ModelCheckpointOptions{.directory = dir.path.string(), .monitor = "loss"};
  const auto stopping_options = optim::EarlyStoppingOptions{.monitor = "loss", .patience = 2};

  auto model = test::make_classifier(7, false);
  Trainer first(model, scripted->function(), sgd(model, 0.0), quiet_options());
  auto checkpoint = std::make_shared<ModelCheckpoint>(checkpoint_options);
  auto stopping = std::make_shared<EarlyStopping>(stopping_options);
  first.fit(problem.batches, {.epochs = 2, .callbacks = {scripted, checkpoint, stopping}});
  REQUIRE(checkpoint->best().has_value());
  REQUIRE_FALSE(stopping->stopped_epoch().has_value());

  auto resumed_model = test::make_classifier(8, false);
  Trainer resumed(resumed_model, scripted->function(), sgd(resumed_model, 0.0), quiet_options());
  resumed.load_checkpoint(checkpoint->last_path());
  auto new_checkpoint = std::make_shared<ModelCheckpoint>(checkpoint_options);
  auto new_stopping = std::make_shared<EarlyStopping>(stopping_options);
  std::optional<double> best_at_begin;
  auto probe = std::make_shared<Hooks>();
  probe->train_begin = [&](Trainer&) { best_at_begin = new_checkpoint->best(); };
  const optim::History history =
      resumed.fit(problem.batches, {.epochs = 10, .callbacks = {scripted, new_checkpoint, new_stopping, probe}});

  CHECK(best_at_begin == checkpoint->best());  // exactly: saved as "%.17g"
  // One more epoch without improvement reaches the patience of 2.
  CHECK(history.epochs.size() == 1);
  CHECK(new_stopping->stopped_epoch() == 2);
  // best.ckpt is still the one of epoch 1 (0-based 0), not rewritten by the resumed run.
  CHECK(saved_epoch(new_checkpoint->best_path()) == 1);
  CHECK(saved_epoch(new_checkpoint->last_path()) == 3);
}

// ---- LrScheduler ----

TEST_CASE("Callbacks: LrScheduler per epoch sets the schedule's rate before each epoch") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.001), quiet_options());
  auto scheduler = std::make_shared<optim::LrScheduler>(std::make_shared<optim::StepLr>(0.1, 2, 0.5));
  const optim::History history = trainer.fit(problem.batches, {.epochs = 5, .callbacks = {scheduler}});
  const auto lr = history.series("lr");
  REQUIRE(lr.size() == 5);
  const std::vector<double> expected{0.1, 0.1, 0.05, 0.05, 0.025};
  for (std::size_t e = 0; e < 5; ++e) CHECK(lr[e] == doctest::Approx(expected[e]).epsilon(1e-15));
}

TEST_CASE("Callbacks: LrScheduler per step gives the optimizer the schedule's rate at every global step") {
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.001), quiet_options());
  const auto warmup =
      std::make_shared<optim::LinearWarmup>(std::make_shared<optim::ConstantLr>(0.2), /*warmup_steps=*/4, 0.25);
  auto scheduler = std::make_shared<optim::LrScheduler>(warmup, optim::LrScheduler::Unit::step);
  std::vector<std::int64_t> steps;
  std::vector<double> rates;
  auto probe = std::make_shared<Hooks>();
  probe->batch_end = [&](Trainer& t, std::int64_t step, const Logs&) {
    steps.push_back(step);
    rates.push_back(t.optimizer().lr());
  };
  trainer.fit(problem.batches, {.epochs = 2, .callbacks = {scheduler, probe}});

  CHECK(steps == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
  REQUIRE(rates.size() == 6);
  for (std::size_t k = 0; k < 6; ++k) {
    CAPTURE(k);
    CHECK(rates[k] == warmup->lr_at(static_cast<std::int64_t>(k)));
  }
  CHECK(rates[0] == doctest::Approx(0.05));
  CHECK(rates[4] == doctest::Approx(0.2));
  CHECK(trainer.optimizer().lr() == warmup->lr_at(5));
}

// ---- Loggers ----

TEST_CASE("Callbacks: CsvLogger writes a header and one row per epoch holding the History's values") {
  Problem problem;
  TempDir dir("callbacks");
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  auto logger = std::make_shared<optim::CsvLogger>(dir.file("log.csv"));
  const optim::History history =
      trainer.fit(problem.batches, {.epochs = 3, .validation = &problem.batches, .callbacks = {logger}});

  const auto lines = lines_of(dir.file("log.csv"));
  REQUIRE(lines.size() == 4);
  const auto columns = names_of(history.epochs.front());
  CHECK(lines[0] == "epoch,loss,accuracy,val_loss,val_accuracy,lr,time_s,samples_per_s");
  CHECK(lines[0] == joined(columns));
  check_rows_match({lines.begin() + 1, lines.end()}, columns, history);
  CHECK(cells_of(lines[3])[0] == "3");
}

TEST_CASE("Callbacks: CsvLogger in append mode after a resume keeps the old rows and writes no second header") {
  Problem problem;
  TempDir dir("callbacks");
  const std::string path = dir.file("log.csv");
  auto model = test::make_classifier(7, false);
  Trainer first(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  const optim::History first_history =
      first.fit(problem.batches, {.epochs = 2, .callbacks = {std::make_shared<optim::CsvLogger>(path, true)}});
  first.save_checkpoint(dir.file("run.ckpt"));
  const auto before = lines_of(path);
  REQUIRE(before.size() == 3);

  auto resumed_model = test::make_classifier(8, false);
  Trainer resumed(resumed_model, layers::cross_entropy, sgd(resumed_model, 0.1), quiet_options());
  resumed.load_checkpoint(dir.file("run.ckpt"));
  const optim::History resumed_history =
      resumed.fit(problem.batches, {.epochs = 4, .callbacks = {std::make_shared<optim::CsvLogger>(path, true)}});

  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 5);
  CHECK(std::vector<std::string>(lines.begin(), lines.begin() + 3) == before);
  const auto columns = cells_of(lines[0]);
  check_rows_match({lines.begin() + 3, lines.end()}, columns, resumed_history);
  std::vector<std::string> epochs;
  for (std::size_t i = 1; i < lines.size(); ++i) epochs.push_back(cells_of(lines[i])[0]);
  CHECK(epochs == std::vector<std::string>{"1", "2", "3", "4"});
}

TEST_CASE("Callbacks: CsvLogger without append replaces an existing file") {
  Problem problem;
  TempDir dir("callbacks");
  const std::string path = dir.file("log.csv");
  std::ofstream(path) << "old,header\n1,2\n3,4\n";
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  trainer.fit(problem.batches, {.epochs = 1, .callbacks = {std::make_shared<optim::CsvLogger>(path)}});
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "epoch,loss,accuracy,lr,time_s,samples_per_s");
}

TEST_CASE("Callbacks: JsonLinesLogger writes one JSON object per epoch with the History's keys and an integer epoch") {
  Problem problem;
  TempDir dir("callbacks");
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  auto logger = std::make_shared<optim::JsonLinesLogger>(dir.file("log.jsonl"));
  const optim::History history =
      trainer.fit(problem.batches, {.epochs = 3, .validation = &problem.batches, .callbacks = {logger}});

  const auto lines = lines_of(dir.file("log.jsonl"));
  REQUIRE(lines.size() == 3);
  for (std::size_t e = 0; e < lines.size(); ++e) {
    CAPTURE(lines[e]);
    const auto object = nlohmann::ordered_json::parse(lines[e]);
    REQUIRE(object.is_object());
    CHECK(object["epoch"].is_number_integer());
    CHECK(object["epoch"].get<std::int64_t>() == static_cast<std::int64_t>(e + 1));
    std::vector<std::string> keys;
    for (const auto& [key, value] : object.items()) keys.push_back(key);
    CHECK(keys == names_of(history.epochs[e]));
    for (const auto& [key, value] : history.epochs[e]) {
      const std::string name = key;
      CAPTURE(name);
      CHECK(object[name].get<double>() == value);
    }
  }
}

TEST_CASE("Callbacks: JsonLinesLogger in append mode keeps the lines already written") {
  Problem problem;
  TempDir dir("callbacks");
  const std::string path = dir.file("log.jsonl");
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  trainer.fit(problem.batches, {.epochs = 2, .callbacks = {std::make_shared<optim::JsonLinesLogger>(path, true)}});
  trainer.fit(problem.batches, {.epochs = 3, .callbacks = {std::make_shared<optim::JsonLinesLogger>(path, true)}});
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 3);
  for (std::size_t e = 0; e < 3; ++e) {
    CHECK(nlohmann::json::parse(lines[e])["epoch"].get<std::int64_t>() == static_cast<std::int64_t>(e + 1));
  }
}

TEST_CASE("Callbacks: a logger whose file cannot be opened is an error naming the path") {
  Problem problem;
  TempDir dir("callbacks");
  const std::string csv = (dir.path / "missing" / "log.csv").string();
  const std::string jsonl = (dir.path / "missing" / "log.jsonl").string();
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  CHECK(throws_error_mentioning(
      [&] { trainer.fit(problem.batches, {.epochs = 1, .callbacks = {std::make_shared<optim::CsvLogger>(csv)}}); },
      {"CsvLogger", "'" + csv + "'"}));
  CHECK(throws_error_mentioning(
      [&] {
        trainer.fit(problem.batches, {.epochs = 1, .callbacks = {std::make_shared<optim::JsonLinesLogger>(jsonl)}});
      },
      {"JsonLinesLogger", "'" + jsonl + "'"}));
}

TEST_CASE("Callbacks: a log file another logger holds is refused, whatever the format, and stays as it was") {
  TempDir dir("callbacks");
  const std::string path = (dir.path / "log.csv").string();
  optim::CsvLogger first(path);
  first.open();
  for (const bool append : {false, true}) {
    optim::CsvLogger csv(path, append);
    CHECK(throws_error_mentioning([&] { csv.open(); }, {"CsvLogger", "'" + path + "'", "another process"}));
    optim::JsonLinesLogger jsonl(path, append);
    CHECK(throws_error_mentioning([&] { jsonl.open(); }, {"JsonLinesLogger", "'" + path + "'", "another process"}));
  }
  Problem problem;
  auto model = test::make_classifier(7, false);
  Trainer trainer(model, layers::cross_entropy, sgd(model, 0.1), quiet_options());
  trainer.fit(problem.batches, {.epochs = 1, .callbacks = {std::shared_ptr<optim::CsvLogger>(&first, [](auto*) {})}});
  // Once training ends the file is closed and unlocked: another logger may write it.
  optim::CsvLogger second(path, true);
  second.open();
}

TEST_CASE("Callbacks: ModelCheckpoint's directory is made and tried before training, and an impossible one named") {
  TempDir dir("callbacks");
  const std::string file = (dir.path / "a-file").string();
  std::ofstream(file) << "x";
  optim::ModelCheckpoint impossible({.directory = file + "/ckpt"});
  CHECK(throws_error_mentioning([&] { (void)impossible.prepare_directory(); },
                                {"ModelCheckpoint", "cannot create the directory", file + "/ckpt"}));
  optim::ModelCheckpoint fine({.directory = (dir.path / "deep" / "ckpt").string()});
  CHECK(fine.prepare_directory().empty());
  CHECK(std::filesystem::is_directory(dir.path / "deep" / "ckpt"));
  CHECK(std::filesystem::is_empty(dir.path / "deep" / "ckpt"));  // the probe is gone
}

