// A loss that turns NaN or infinite (optim/engine/trainer.hpp, on_non_finite):
// fit stops before that step's update, naming the epoch and step, or skips
// the update exactly; checkpoints are never written from non-finite state.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>

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
using ddl::optim::TrainerOptions;
using ddl::test::flat_parameters;
using ddl::test::poisoned_loss;
using ddl::test::quiet_options;
using ddl::test::TempDir;
using ddl::test::TensorBatches;
using ddl::test::WeightsAfterEachStep;
using ddl::test::throws_error_mentioning;

namespace {

bool all_finite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("Trainer: a NaN or infinite loss stops fit before that step's update, naming the epoch and the step") {
  const auto data = test::make_blobs(29, 3);  // batches of 8: 4 steps per epoch
  for (const float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    CAPTURE(poison);
    auto model = test::make_classifier(5, false);
    auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
    Trainer trainer(model, poisoned_loss({5}, poison), optimizer, quiet_options());
    TensorBatches batches(data.inputs, data.labels, 8);
    auto steps = std::make_shared<WeightsAfterEachStep>();
    CHECK(throws_error_mentioning([&] { trainer.fit(batches, {.epochs = 3, .callbacks = {steps}}); },
                                  {"the loss is " + fmt::format("{}", poison), "epoch 2, step 2 of 4", "step 6 overall",
                                   "before this step's update"}));
    // The sixth step never reached the weights: they are the fifth's.
    REQUIRE(steps->weights.size() == 5);
    CHECK(flat_parameters(*model) == steps->weights.back());
    CHECK(trainer.epoch() == 1);
  }
}

TEST_CASE("Trainer: skipping a non-finite step drops its update exactly, momentum included, and counts it") {
  const auto data = test::make_blobs(29, 3);
  auto model = test::make_classifier(5, false);
  auto reference = test::make_classifier(5, false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
  optim::SGD reference_optimizer(reference->parameters(), optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
  TrainerOptions options = quiet_options();
  options.on_non_finite = TrainerOptions::OnNonFinite::skip;
  const std::set<int> poisoned{1, 6};
  Trainer trainer(model, poisoned_loss(poisoned, std::numeric_limits<float>::quiet_NaN()), optimizer, options);
  TensorBatches batches(data.inputs, data.labels, 8);
  const optim::History history = trainer.fit(batches, {.epochs = 2});

  // The hand-written loop that never saw the poisoned batches.
  int call = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (std::int64_t start = 0; start < 29; start += 8, ++call) {
      if (poisoned.count(call) != 0) continue;
      const std::int64_t end = std::min<std::int64_t>(start + 8, 29);
      reference->zero_grad();
      layers::cross_entropy((*reference)(slice(data.inputs, start, end)), slice(data.labels, start, end)).backward();
      reference_optimizer.step();
    }
  }
  CHECK(flat_parameters(*model) == flat_parameters(*reference));
  CHECK(trainer.step() == 8);
  REQUIRE(history.epochs.size() == 2);
  for (const optim::Logs& logs : history.epochs) {
    CHECK(logs.at("skipped_steps") == 1.0);
    CHECK(std::isfinite(logs.at("loss")));  // the skipped steps' losses are not averaged in
  }
}

TEST_CASE("Trainer: an epoch whose every step is skipped stops training") {
  const auto data = test::make_blobs(16, 3);
  auto model = test::make_classifier(5, false);
  TrainerOptions options = quiet_options();
  options.on_non_finite = TrainerOptions::OnNonFinite::skip;
  Trainer trainer(model, poisoned_loss({2, 3}, std::numeric_limits<float>::infinity()),
                  std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1}), options);
  TensorBatches batches(data.inputs, data.labels, 8);  // 2 steps per epoch: the second epoch is all poisoned
  CHECK(throws_error_mentioning([&] { trainer.fit(batches, {.epochs = 3}); },
                                {"every one of the 2 steps of epoch 2", "skipped"}));
  CHECK(all_finite(flat_parameters(*model)));
}

TEST_CASE("Trainer: a checkpoint is never written from non-finite weights or optimizer state, the file there stays") {
  const auto data = test::make_blobs(12, 1);
  TempDir dir("non_finite");
  auto model = test::make_classifier(3, false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1, .momentum = 0.5});
  Trainer trainer(model, layers::cross_entropy, optimizer, quiet_options());
  TensorBatches batches(data.inputs, data.labels, 4);
  trainer.fit(batches, {.epochs = 1});
  const std::string path = dir.file("last.ckpt");
  trainer.save_checkpoint(path);
  const std::string good = file_bytes(path);

  const auto [name, weight] = model->named_parameters().back();
  const std::vector<float> kept = weight.to_vector<float>();
  std::vector<float> bad = kept;
  bad[bad.size() / 2] = std::numeric_limits<float>::infinity();
  weight.detach().copy_from(from_vector(bad, weight.shape()));
  CHECK(throws_error_mentioning([&] { trainer.save_checkpoint(path); }, {"last.ckpt", "not written", "model." + name}));
  CHECK(file_bytes(path) == good);

  weight.detach().copy_from(from_vector(kept, weight.shape()));
  const auto [entry, velocity] = optimizer->state().back();  // front() is the step count
  const std::vector<float> saved_velocity = velocity.to_vector<float>();
  std::vector<float> nan_velocity = saved_velocity;
  nan_velocity.front() = std::numeric_limits<float>::quiet_NaN();
  velocity.detach().copy_from(from_vector(nan_velocity, velocity.shape()));
  CHECK(throws_error_mentioning([&] { trainer.save_checkpoint(path); }, {"not written", "optimizer." + entry}));
  CHECK(file_bytes(path) == good);
  velocity.detach().copy_from(from_vector(saved_velocity, velocity.shape()));
  trainer.save_checkpoint(path);  // finite again: written
  CHECK(file_bytes(path) == good);
}
