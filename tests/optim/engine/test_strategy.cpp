// The Trainer's side of the Strategy interface (optim/engine/strategy.hpp): the
// order in which it calls the hooks, gradient accumulation (K batches per
// optimizer step equal one step on their concatenation), and a rank whose
// strategy computes no output contributing nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/optim/engine/trainer.hpp>
#include <ddl/optim/sgd.hpp>

#include "engine_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::optim::Trainer;
using ddl::test::flat_parameters;
using ddl::test::quiet_options;
using ddl::test::TensorBatches;

namespace {

// The single-process strategy, writing down every hook the Trainer calls.
class RecordingStrategy : public optim::Strategy {
 public:
  std::vector<std::string> calls;

  void prepare(layers::Module& model, optim::Optimizer* optimizer) override {
    calls.push_back("prepare");
    Strategy::prepare(model, optimizer);
  }
  void begin_epoch(optim::BatchSource& data, std::int64_t epoch) override {
    calls.push_back("begin_epoch " + std::to_string(epoch));
    Strategy::begin_epoch(data, epoch);
  }
  std::optional<optim::Batch> next_batch(optim::BatchSource& data) override {
    auto batch = Strategy::next_batch(data);
    calls.push_back(batch ? "next_batch " + std::to_string(batch->size()) : "next_batch end");
    return batch;
  }
  void begin_step(layers::Module& model) override {
    calls.push_back("begin_step");
    Strategy::begin_step(model);
  }
  optim::StepOutput forward_backward(layers::Module& model, const optim::LossFunction& loss, const optim::Batch& batch,
                                     const optim::StepShare& share) override {
    calls.push_back(fmt::format("forward_backward {:g}{}", share.loss_scale, share.last ? " last" : ""));
    return Strategy::forward_backward(model, loss, batch, share);
  }
  void synchronize_gradients(layers::Module& model) override {
    calls.push_back("synchronize_gradients");
    Strategy::synchronize_gradients(model);
  }
  void update(layers::Module& model, optim::Optimizer& optimizer) override {
    calls.push_back("update");
    Strategy::update(model, optimizer);
  }
  optim::StepOutput forward(layers::Module& model, const optim::Batch& batch,
                            const optim::LossFunction& loss) override {
    calls.push_back(loss ? "forward with loss" : "forward");
    return Strategy::forward(model, batch, loss);
  }
  void gather_state(const layers::Module& model, optim::TrainingState& state) override {
    calls.push_back("gather_state");
    Strategy::gather_state(model, state);
  }
  void select_state(const layers::Module& model, optim::TrainingState& state) override {
    calls.push_back("select_state");
    Strategy::select_state(model, state);
  }
  void sum_over_ranks(std::vector<double>& values) override {
    calls.push_back("sum_over_ranks");
    Strategy::sum_over_ranks(values);
  }
  std::vector<std::shared_ptr<optim::Callback>> callbacks(const layers::Module& model) override {
    calls.push_back("callbacks");
    return Strategy::callbacks(model);
  }
};

// Counts the batches it sees and the fits it is part of.
struct CountingCallback : optim::Callback {
  int trainings = 0;
  int batches = 0;
  void on_train_begin(Trainer& /*trainer*/) override { ++trainings; }
  void on_batch_end(Trainer& /*trainer*/, std::int64_t /*step*/, const optim::Logs& /*logs*/) override { ++batches; }
};

// A strategy that watches training with a callback of its own and reports
// what it saw.
class WatchingStrategy : public optim::Strategy {
 public:
  std::shared_ptr<CountingCallback> counter = std::make_shared<CountingCallback>();
  std::vector<std::shared_ptr<optim::Callback>> callbacks(const layers::Module& /*model*/) override {
    return {counter};
  }
  std::string report(const layers::Module& /*model*/, const optim::Optimizer& /*optimizer*/) override {
    return fmt::format("{} batches in {} fit(s)", counter->batches, counter->trainings);
  }
};

// A rank that computes no output: it reads data and takes steps, but its
// forward passes give nothing (as a parameter server's servers, or the
// stages of a pipeline before the last).
class SilentStrategy : public optim::Strategy {
 public:
  optim::StepOutput forward_backward(layers::Module& /*model*/, const optim::LossFunction& /*loss*/,
                                     const optim::Batch& /*batch*/, const optim::StepShare& /*share*/) override {
    return {};
  }
  optim::StepOutput forward(layers::Module& /*model*/, const optim::Batch& /*batch*/,
                            const optim::LossFunction& /*loss*/) override {
    return {};
  }
};

std::vector<float> train_with_accumulation(std::int64_t batch_size, std::int64_t batches_per_step, int epochs,
                                           optim::History* history = nullptr) {
  const auto data = test::make_blobs(50, 21);
  auto model = test::make_classifier(9, /*dropout=*/false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.2, .momentum = 0.9});
  optim::TrainerOptions options = quiet_options();
  options.batches_per_step = batches_per_step;
  Trainer trainer(model, layers::cross_entropy, optimizer, options);
  TensorBatches batches(data.inputs, data.labels, batch_size, /*shuffle=*/true);
  const optim::History trained = trainer.fit(batches, {.epochs = epochs});
  if (history != nullptr) *history = trained;
  // 50 samples in steps of batch_size * batches_per_step, the last one short.
  CHECK(trainer.step() == epochs * ((50 + batch_size * batches_per_step - 1) / (batch_size * batches_per_step)));
  return flat_parameters(*model);
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double{a[i]} - double{b[i]}));
  return worst;
}

}  // namespace

TEST_CASE("Trainer: the strategy's hooks are called in the documented order") {
  const auto data = test::make_blobs(10, 3);
  auto strategy = std::make_shared<RecordingStrategy>();
  auto model = test::make_classifier(5, false);
  optim::TrainerOptions options = quiet_options({optim::Metric::accuracy}, strategy);
  options.batches_per_step = 2;
  Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()), options);
  TensorBatches batches(data.inputs, data.labels, 4);  // batches of 4, 4 and 2

  trainer.fit(batches, {.epochs = 1, .validation = &batches});
  const std::vector<std::string> fit{
      "prepare",
      "callbacks",
      "begin_epoch 0",
      "next_batch 4", "next_batch 4",
      "begin_step", "forward_backward 0.5", "forward_backward 0.5 last", "synchronize_gradients", "sum_over_ranks", "update",
      "next_batch 2", "next_batch end",
      "begin_step", "forward_backward 1 last", "synchronize_gradients", "sum_over_ranks", "update",
      "sum_over_ranks",
      // validation
      "begin_epoch 0",
      "next_batch 4", "forward with loss", "next_batch 4", "forward with loss", "next_batch 2", "forward with loss",
      "next_batch end",
      "sum_over_ranks",
  };
  CHECK(strategy->calls == fit);

  strategy->calls.clear();
  (void)trainer.predict(batches);
  test::TempDir dir;
  trainer.save_checkpoint((dir.path / "a.ckpt").string());
  const std::vector<std::string> predict_and_save{
      "begin_epoch 0", "next_batch 4", "forward", "next_batch 4", "forward", "next_batch 2", "forward",
      "next_batch end", "gather_state", "sum_over_ranks", "sum_over_ranks",
  };
  CHECK(strategy->calls == predict_and_save);
  strategy->calls.clear();
  trainer.load_checkpoint((dir.path / "a.ckpt").string());
  CHECK(strategy->calls == std::vector<std::string>{"select_state"});
}

TEST_CASE("Trainer: the callbacks a strategy asks for run beside the caller's, in every fit") {
  const auto data = test::make_blobs(10, 3);
  auto strategy = std::make_shared<WatchingStrategy>();
  auto model = test::make_classifier(5, false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters());
  Trainer trainer(model, layers::cross_entropy, optimizer, quiet_options({}, strategy));
  TensorBatches batches(data.inputs, data.labels, 4);  // 3 batches an epoch
  auto callers = std::make_shared<CountingCallback>();
  trainer.fit(batches, {.epochs = 2, .callbacks = {callers}});
  trainer.fit(batches, {.epochs = 3});
  CHECK(callers->batches == 6);
  CHECK(strategy->counter->batches == 9);
  CHECK(strategy->report(*model, *optimizer) == "9 batches in 2 fit(s)");
  // One process has nothing to add to a run's header or report.
  optim::Strategy alone;
  CHECK(alone.describe(128).empty());
  CHECK(alone.callbacks(*model).empty());
  CHECK(alone.report(*model, *optimizer).empty());
}

TEST_CASE("Trainer: accumulating K batches per step trains the weights of one batch K times as large") {
  // 50 samples: steps of 12 with a last one of 2, as batches of 4 grouped
  // by 3 (the last group a single batch of 2); both see the same samples
  // per step (the shuffle depends on the epoch only).
  optim::History accumulated_history, whole_history;
  const auto accumulated = train_with_accumulation(4, 3, 2, &accumulated_history);
  const auto whole = train_with_accumulation(12, 1, 2, &whole_history);
  const auto unaccumulated = train_with_accumulation(4, 1, 2);
  // The same arithmetic up to the order of float32 sums (GEMMs over 4 rows
  // added three times instead of one over 12): a few roundings of the
  // largest weight over 10 steps (seen: 2 units in the last place).
  double largest = 0.0;
  for (const float w : whole) largest = std::max(largest, std::abs(double{w}));
  CHECK(max_difference(accumulated, whole) <= 16 * std::numeric_limits<float>::epsilon() * largest);
  // Not vacuous: without accumulation, the steps are other steps.
  CHECK(max_difference(unaccumulated, whole) > 1e-2);
  // Metrics are per sample either way.
  CHECK(accumulated_history.epochs.back().at("loss") ==
        doctest::Approx(whole_history.epochs.back().at("loss")).epsilon(1e-5));
  CHECK(accumulated_history.epochs.back().at("accuracy") == whole_history.epochs.back().at("accuracy"));
}

TEST_CASE("Trainer: batches_per_step below 1 is refused") {
  auto model = test::make_classifier(5, false);
  optim::TrainerOptions options = quiet_options();
  options.batches_per_step = 0;
  CHECK_THROWS_WITH_AS(
      Trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()), options),
      doctest::Contains("batches_per_step must be >= 1, got 0"), Error);
}

TEST_CASE("Trainer: a rank whose strategy computes no output trains and reports nothing") {
  const auto data = test::make_blobs(10, 3);
  auto model = test::make_classifier(5, false);
  const auto before = flat_parameters(*model);
  Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()),
                  quiet_options({optim::Metric::accuracy}, std::make_shared<SilentStrategy>()));
  TensorBatches batches(data.inputs, data.labels, 4);
  const optim::History history = trainer.fit(batches, {.epochs = 1});
  CHECK(trainer.step() == 3);
  CHECK(flat_parameters(*model) == before);  // no gradient: the optimizer changed nothing
  CHECK(history.epochs.front().at("loss") == 0.0);
  CHECK_FALSE(trainer.predict(batches).defined());
  // Alone, no other rank adds samples to the sums: nothing to average.
  CHECK_THROWS_WITH_AS(trainer.evaluate(batches), doctest::Contains("no rank computed an output"), Error);
}

TEST_CASE("Trainer: a callback that saves checkpoints on the root rank only is refused") {
  // save_checkpoint is collective: on rank 0 alone it would wait for ranks
  // that never join (the parameter server's gather).
  struct RootOnlySaver : optim::Callback {
    bool root_only() const override { return true; }
    bool saves_checkpoints() const override { return true; }
  };
  const auto data = test::make_blobs(10, 3);
  auto model = test::make_classifier(5, false);
  Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()), quiet_options());
  TensorBatches batches(data.inputs, data.labels, 4);
  CHECK_THROWS_WITH_AS(trainer.fit(batches, {.epochs = 1, .callbacks = {std::make_shared<RootOnlySaver>()}}),
                       doctest::Contains("must run on every rank"), Error);
  CHECK(trainer.step() == 0);
}
