// A loss that turns NaN on one rank only (optim::TrainerOptions::
// on_non_finite) under data parallelism and a pipeline: the ranks agree
// within the step, so all stop together naming the step and the rank, or all
// skip its update and stay identical. No rank is left waiting.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <span>

#include <ddl/ddl.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>

#include "optim/engine/engine_fixtures.hpp"
#include "parallel/training_fixtures.hpp"
#include "support/test_data.hpp"

namespace ddl::test {
namespace {

using parallel::Communicator;
using Policy = optim::TrainerOptions::OnNonFinite;

// Whether every rank holds the same values as rank 0.
bool same_on_every_rank(const Communicator& comm, const std::vector<float>& values) {
  std::vector<float> root = values;
  comm.broadcast_bytes(std::as_writable_bytes(std::span<float>(root)), 0);
  std::array<double, 1> differing{root == values ? 0.0 : 1.0};
  comm.sum_doubles(differing);
  return differing[0] == 0.0;
}

struct Outcome {
  std::string error;  // empty: fit returned
  std::vector<float> parameters;
  std::vector<std::vector<float>> after_each_step;
  optim::History history;
};

// Two epochs of small_cnn under `strategy` (null: one process) whose loss is
// NaN at the calls `poisoned` where `poison_here`.
Outcome fit_with_nan(const std::shared_ptr<optim::Strategy>& strategy, bool poison_here, std::set<int> poisoned,
                     Policy policy, std::int64_t batch) {
  auto model = small_cnn(5);
  optim::TrainerOptions options = quiet_options({}, strategy);
  options.on_non_finite = policy;
  const optim::LossFunction loss = poison_here ? poisoned_loss(std::move(poisoned), std::numeric_limits<float>::quiet_NaN())
                                               : optim::LossFunction(layers::cross_entropy);
  optim::Trainer trainer(model, loss, sgd_with_momentum()(model->parameters()), options);
  models::DataLoader loader(random_images(), {.batch_size = batch, .shuffle = true, .seed = 3});
  auto steps = std::make_shared<WeightsAfterEachStep>();
  Outcome outcome;
  try {
    outcome.history = trainer.fit(loader, {.epochs = 2, .callbacks = {steps}});
  } catch (const optim::NonFiniteLoss& error) {
    outcome.error = error.what();
  }
  outcome.parameters = flat_parameters(*model);
  outcome.after_each_step = steps->weights;
  return outcome;
}

}  // namespace

TEST_CASE("DataParallel: a NaN loss on one rank stops every rank at that step, naming it, before the update") {
  const Communicator world = Communicator::world();
  const int last = world.size() - 1;
  // 48 samples at a global batch of 12: 4 steps per epoch; the last rank's
  // third loss is epoch 1's third step.
  const Outcome outcome = fit_with_nan(std::make_shared<parallel::DataParallel>(world), world.rank() == last, {2},
                                       Policy::stop, kGlobalBatch / world.size());
  CHECK(outcome.error.find("epoch 1, step 3 of 4") != std::string::npos);
  CHECK(outcome.error.find(fmt::format("on rank {}", last)) != std::string::npos);
  REQUIRE(outcome.after_each_step.size() == 2);
  CHECK(outcome.parameters == outcome.after_each_step.back());
  CHECK(same_on_every_rank(world, outcome.parameters));
}

TEST_CASE("DataParallel: skipping a step whose loss is NaN on one rank skips it on every rank, as one process would") {
  const Communicator world = Communicator::world();
  const Outcome alone = fit_with_nan(nullptr, true, {2, 5}, Policy::skip, kGlobalBatch);
  const Outcome outcome = fit_with_nan(std::make_shared<parallel::DataParallel>(world), world.rank() == 0, {2, 5},
                                       Policy::skip, kGlobalBatch / world.size());
  CHECK(outcome.error.empty());
  REQUIRE(outcome.history.epochs.size() == 2);
  for (const optim::Logs& logs : outcome.history.epochs) {
    CHECK(logs.at("skipped_steps") == 1.0);
    CHECK(std::isfinite(logs.at("loss")));
  }
  CHECK(same_on_every_rank(world, outcome.parameters));
  CHECK(max_relative_difference(outcome.parameters, alone.parameters) <= 1e-5);
}

TEST_CASE("Pipeline: a NaN loss on the last stage stops every stage at that step, before any stage's update") {
  const Communicator world = Communicator::world();
  const layers::LayerList list = small_cnn_layers();
  auto pipeline = std::make_shared<parallel::Pipeline>(
      world, parallel::balanced_split(std::vector<double>(list.size(), 1.0), world.size()),
      parallel::PipelineOptions{.micro_batches = 2});
  Generator generator(9);
  auto stage = parallel::build_stage(list, *pipeline, &generator);
  optim::TrainerOptions options = quiet_options({}, pipeline);
  // Two micro-batches per step: the fifth loss is step 3's first.
  const bool last = world.rank() == world.size() - 1;
  optim::Trainer trainer(stage, last ? poisoned_loss({4}, std::numeric_limits<float>::infinity())
                                     : optim::LossFunction(layers::cross_entropy),
                         sgd_with_momentum()(stage->parameters()), options);
  models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch, .shuffle = true, .seed = 3});
  auto steps = std::make_shared<WeightsAfterEachStep>();
  std::string error;
  try {
    trainer.fit(loader, {.epochs = 2, .callbacks = {steps}});
  } catch (const optim::NonFiniteLoss& thrown) {
    error = thrown.what();
  }
  CHECK(error.find("epoch 1, step 3 of 4") != std::string::npos);
  REQUIRE(steps->weights.size() == 2);
  CHECK(flat_parameters(*stage) == steps->weights.back());
}

}  // namespace ddl::test
