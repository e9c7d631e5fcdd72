// The training engine (optim/engine/trainer.hpp): fit is the hand-written loop,
// metrics average over every sample, evaluate / predict, checkpoints that
// resume bitwise and refuse a trainer they do not fit, progress output.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/optim/adadelta.hpp>
#include <ddl/optim/adam.hpp>
#include <ddl/optim/engine/callbacks.hpp>
#include <ddl/optim/engine/trainer.hpp>
#include <ddl/optim/sgd.hpp>

#include "engine_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::optim::Trainer;
using ddl::test::flat_parameters;
using ddl::test::quiet_options;
using ddl::test::TempDir;
using ddl::test::TensorBatches;
using ddl::test::throws_error_mentioning;

namespace {

}  // namespace

TEST_CASE("Trainer: fit performs exactly the hand-written training loop") {
  const auto data = test::make_blobs(29, 3);
  auto model = test::make_classifier(5, /*dropout=*/false);
  auto reference = test::make_classifier(5, false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
  optim::SGD reference_optimizer(reference->parameters(), optim::SgdOptions{.lr = 0.1, .momentum = 0.9});

  Trainer trainer(model, layers::cross_entropy, optimizer, quiet_options());
  TensorBatches batches(data.inputs, data.labels, 8);
  trainer.fit(batches, {.epochs = 2});

  for (int epoch = 0; epoch < 2; ++epoch) {
    for (std::int64_t start = 0; start < 29; start += 8) {
      const std::int64_t end = std::min<std::int64_t>(start + 8, 29);
      reference->zero_grad();
      layers::cross_entropy((*reference)(slice(data.inputs, start, end)), slice(data.labels, start, end)).backward();
      reference_optimizer.step();
    }
  }
  CHECK(trainer.epoch() == 2);
  CHECK(trainer.step() == 8);
  CHECK(flat_parameters(*model) == flat_parameters(*reference));
}

TEST_CASE("Trainer: fit learns a separable problem and records a History") {
  const auto data = test::make_blobs(150, 11);
  auto model = test::make_classifier(2, true);
  auto optimizer = std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 0.01});
  Trainer trainer(model, layers::cross_entropy, optimizer, quiet_options());
  TensorBatches train(data.inputs, data.labels, 16, /*shuffle=*/true);
  const optim::History history = trainer.fit(train, {.epochs = 15, .validation = &train});

  REQUIRE(history.epochs.size() == 15);
  std::vector<std::string> names;
  for (const auto& entry : history.epochs.front()) names.push_back(entry.first);
  CHECK(names == std::vector<std::string>{"epoch", "loss", "accuracy", "val_loss", "val_accuracy", "lr", "time_s",
                                          "samples_per_s"});
  CHECK(history.series("epoch") == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  const auto loss = history.series("loss");
  CHECK(loss.back() < 0.5 * loss.front());
  CHECK(history.epochs.back().at("val_accuracy") > 0.9);
  CHECK(history.epochs.back().at("samples_per_s") > 0.0);
}

TEST_CASE("Trainer: evaluate averages loss and metrics over all samples, not over batches") {
  const auto data = test::make_blobs(23, 4);
  auto model = test::make_classifier(8, false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1});
  Trainer trainer(model, layers::cross_entropy, optimizer, quiet_options());
  TensorBatches batches(data.inputs, data.labels, 7);  // 7, 7, 7, 2
  const optim::Logs logs = trainer.evaluate(batches);

  const Tensor logits = (*model)(data.inputs).detach();
  const double expected_loss = layers::cross_entropy(logits, data.labels).item();
  const auto predicted = argmax(logits, 1).to_vector<std::int64_t>();
  const auto labels = data.labels.to_vector<std::int64_t>();
  double correct = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
  CHECK(logs.at("loss") == doctest::Approx(expected_loss).epsilon(1e-6));
  CHECK(logs.at("accuracy") == doctest::Approx(correct / 23.0));
  CHECK(model->is_training());
}

TEST_CASE("Trainer: predict returns the outputs of every sample in order, in evaluation mode") {
  const auto data = test::make_blobs(19, 6);
  auto model = test::make_classifier(9, true);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1});
  Trainer trainer(model, layers::cross_entropy, optimizer, quiet_options());
  TensorBatches batches(data.inputs, data.labels, 5);
  const Tensor predicted = trainer.predict(batches);
  model->eval();
  const Tensor expected = (*model)(data.inputs);
  CHECK(predicted.shape() == Shape{19, 3});
  // Batches of 5 against one batch of 19: the GEMMs may block differently.
  CHECK(test::all_close(predicted.to_vector<float>(), expected.to_vector<float>(), 1e-6, 1e-5));
}

TEST_CASE("Trainer: training resumed from a checkpoint equals uninterrupted training bit for bit") {
  const auto data = test::make_blobs(41, 21);
  TempDir dir("trainer");
  const auto run = [&](std::int64_t first_epochs, bool resume) {
    manual_seed(77);
    auto model = test::make_classifier(13, /*dropout=*/true);
    auto optimizer = std::make_shared<optim::Adadelta>(model->parameters(), optim::AdadeltaOptions{});
    auto trainer = std::make_unique<Trainer>(model, layers::cross_entropy, optimizer, quiet_options());
    TensorBatches batches(data.inputs, data.labels, 6, /*shuffle=*/true);
    trainer->fit(batches, {.epochs = first_epochs});
    if (resume) {
      trainer->save_checkpoint(dir.file("run.ckpt"));
      manual_seed(12345);  // the checkpoint must bring back the generator, not this
      model = test::make_classifier(99, true);
      optimizer = std::make_shared<optim::Adadelta>(model->parameters(), optim::AdadeltaOptions{});
      trainer = std::make_unique<Trainer>(model, layers::cross_entropy, optimizer, quiet_options());
      trainer->load_checkpoint(dir.file("run.ckpt"));
      CHECK(trainer->epoch() == first_epochs);
    }
    trainer->fit(batches, {.epochs = 4});
    CHECK(trainer->step() == 4 * 7);
    return std::make_pair(flat_parameters(*model), optimizer->state());
  };
  const auto [uninterrupted, uninterrupted_state] = run(4, false);
  const auto [resumed, resumed_state] = run(2, true);
  CHECK(uninterrupted == resumed);
  REQUIRE(uninterrupted_state.size() == resumed_state.size());
  for (std::size_t i = 0; i < resumed_state.size(); ++i) {
    const std::string state_name = resumed_state[i].first;
    CAPTURE(state_name);
    if (resumed_state[i].second.dtype() == DType::Float32) {
      CHECK(resumed_state[i].second.to_vector<float>() == uninterrupted_state[i].second.to_vector<float>());
    }
  }
}

TEST_CASE("Trainer: training resumed from a mid-epoch checkpoint equals uninterrupted training bit for bit") {
  const auto data = test::make_blobs(41, 21);  // batches of 6: 7 per epoch
  TempDir dir("trainer");
  // Stops the run (as a kill would) when step `at` is about to begin.
  struct Interrupt : optim::Callback {
    std::int64_t at;
    explicit Interrupt(std::int64_t step) : at(step) {}
    void on_batch_begin(Trainer& /*trainer*/, std::int64_t step) override {
      if (step == at) throw std::runtime_error("interrupted");
    }
  };
  for (const std::int64_t batches_per_step : {1, 2}) {
    CAPTURE(batches_per_step);
    const std::string path = dir.file(fmt::format("last-{}.ckpt", batches_per_step));
    const auto make = [&](std::uint64_t seed) {
      manual_seed(seed);
      auto model = test::make_classifier(13, /*dropout=*/true);
      auto optimizer = std::make_shared<optim::Adadelta>(model->parameters(), optim::AdadeltaOptions{});
      optim::TrainerOptions options = quiet_options();
      options.batches_per_step = batches_per_step;
      return std::make_pair(model, std::make_unique<Trainer>(model, layers::cross_entropy, optimizer, options));
    };
    const auto every_3_steps = std::make_shared<optim::ModelCheckpoint>(
        optim::ModelCheckpointOptions{.directory = dir.path.string(), .save_best = false, .every_steps = 3});
    TensorBatches batches(data.inputs, data.labels, 6, /*shuffle=*/true);

    auto [model, trainer] = make(77);
    const optim::History uninterrupted = trainer->fit(batches, {.epochs = 3});
    const std::vector<float> expected = flat_parameters(*model);

    // Steps per epoch: 7 of one batch, or 4 of two (the last of one). The
    // run stops in epoch 2 after its checkpoint of step 9 (or 6): 2 steps in.
    const std::int64_t per_epoch = batches_per_step == 1 ? 7 : 4;
    auto [first_model, first] = make(77);
    CHECK_THROWS_AS(first->fit(batches, {.epochs = 3,
                                         .callbacks = {every_3_steps, std::make_shared<Interrupt>(per_epoch + 3)}}),
                    std::runtime_error);
    std::filesystem::rename(dir.file("last.ckpt"), path);

    auto [resumed_model, resumed] = make(12345);  // the checkpoint must bring back the generator, not this
    resumed->load_checkpoint(path);
    CHECK(resumed->epoch() == 1);
    CHECK(resumed->step() == per_epoch + 2);
    CHECK(resumed->epoch_batches() == 2 * batches_per_step);
    const optim::History rest = resumed->fit(batches, {.epochs = 3});
    CHECK(resumed->step() == 3 * per_epoch);
    CHECK(flat_parameters(*resumed_model) == expected);
    // The interrupted epoch's metrics count the batches before the checkpoint too.
    REQUIRE(rest.epochs.size() == 2);
    for (const char* name : {"loss", "accuracy"}) {
      CAPTURE(name);
      CHECK(rest.epochs[0].at(name) == uninterrupted.epochs[1].at(name));
      CHECK(rest.epochs[1].at(name) == uninterrupted.epochs[2].at(name));
    }
  }
}

TEST_CASE("Trainer: a checkpoint of another optimizer or model is refused and changes nothing") {
  const auto data = test::make_blobs(12, 1);
  TempDir dir("trainer");
  auto model = test::make_classifier(3, false);
  Trainer trainer(model, layers::cross_entropy,
                  std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{}), quiet_options());
  TensorBatches batches(data.inputs, data.labels, 4);
  trainer.fit(batches, {.epochs = 1});
  trainer.save_checkpoint(dir.file("adam.ckpt"));

  auto other = test::make_classifier(4, false);
  const auto before = flat_parameters(*other);
  Trainer sgd_trainer(other, layers::cross_entropy,
                      std::make_shared<optim::SGD>(other->parameters(), optim::SgdOptions{.lr = 0.1}), quiet_options());
  CHECK(throws_error_mentioning([&] { sgd_trainer.load_checkpoint(dir.file("adam.ckpt")); },
                                {"adam.ckpt", "Adam", "SGD"}));

  Generator generator(1);
  auto wider = std::make_shared<layers::Sequential>();
  wider->emplace<layers::Dense>(4, 17, true, &generator).emplace<layers::ReLU>().emplace<layers::Dense>(17, 3, true,
                                                                                                         &generator);
  Trainer wider_trainer(wider, layers::cross_entropy,
                        std::make_shared<optim::Adam>(wider->parameters(), optim::AdamOptions{}), quiet_options());
  const auto wider_before = flat_parameters(*wider);
  CHECK(throws_error_mentioning([&] { wider_trainer.load_checkpoint(dir.file("adam.ckpt")); },
                                {"adam.ckpt", "0.weight"}));
  CHECK(flat_parameters(*wider) == wider_before);
  CHECK(wider_trainer.epoch() == 0);
  CHECK(flat_parameters(*other) == before);
}

TEST_CASE("Trainer: a training source that yields no batch is an error naming the epoch") {
  const auto data = test::make_blobs(3, 1);
  auto model = test::make_classifier(3, false);
  Trainer trainer(model, layers::cross_entropy,
                  std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1}), quiet_options());
  TensorBatches empty(slice(data.inputs, 0, 0), slice(data.labels, 0, 0), 4);
  CHECK(throws_error_mentioning([&] { trainer.fit(empty, {.epochs = 1}); }, {"no batch", "epoch 1"}));
}

TEST_CASE("Trainer: output off a terminal is one plain line per epoch, quiet prints nothing") {
  const auto data = test::make_blobs(20, 1);
  auto model = test::make_classifier(3, false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1});
  TensorBatches batches(data.inputs, data.labels, 8);

  std::ostringstream plain;
  optim::TrainerOptions options = quiet_options();
  options.verbosity = optim::Verbosity::progress;
  options.out = &plain;
  Trainer(model, layers::cross_entropy, optimizer, options).fit(batches, {.epochs = 2, .validation = &batches});
  const std::string text = plain.str();
  CHECK(text.find("Epoch 1/2 - ") == 0);
  CHECK(text.find("\nEpoch 2/2 - ") != std::string::npos);
  CHECK(text.find("val_accuracy: ") != std::string::npos);
  CHECK(text.find("samples/s") != std::string::npos);
  CHECK(text.find('\r') == std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);

  std::ostringstream terminal;
  options.out = &terminal;
  options.terminal = true;
  Trainer(model, layers::cross_entropy, optimizer, options).fit(batches, {.epochs = 3});
  CHECK(terminal.str().find("Epoch 3/3\n") != std::string::npos);
  CHECK(terminal.str().find("3/3 [==============================]") != std::string::npos);

  std::ostringstream silent;
  options.out = &silent;
  options.verbosity = optim::Verbosity::quiet;
  Trainer(model, layers::cross_entropy, optimizer, options).fit(batches, {.epochs = 1});
  CHECK(silent.str().empty());
}
