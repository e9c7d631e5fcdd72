// A loss that explodes but stays finite (optim/engine/loss_guard.hpp,
// TrainerOptions::divergence_factor): fit stops before that step's update,
// or skips it, as for a NaN; a healthy run, its loss trained down to near
// zero included, is never stopped.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/optim/engine/loss_guard.hpp>
#include <ddl/optim/engine/trainer.hpp>
#include <ddl/optim/sgd.hpp>

#include "engine_fixtures.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::optim::LossGuard;
using ddl::optim::Trainer;
using ddl::optim::TrainerOptions;
using ddl::test::flat_parameters;
using ddl::test::poisoned_loss;
using ddl::test::quiet_options;
using ddl::test::TensorBatches;
using ddl::test::throws_error_mentioning;
using ddl::test::WeightsAfterEachStep;

TEST_CASE("LossGuard: a healthy run's losses pass, from an untrained model's down to near zero, spikes included") {
  std::mt19937 random(17);
  std::lognormal_distribution<double> noise(0.0, 1.0);  // a batch's loss varies by e^±2 and more
  for (const double floor : {1.0, 1e-3, 1e-7}) {
    CAPTURE(floor);
    LossGuard guard(1000.0);
    for (int step = 0; step < 3000; ++step) {
      // ln(10) at first, falling to `floor` (a memorised training set).
      const double typical = floor + (std::log(10.0) - floor) * std::exp(-step / 200.0);
      const double loss = typical * noise(random);
      CAPTURE(step);
      CAPTURE(loss);
      REQUIRE_FALSE(guard.check(loss).has_value());
    }
    // One batch as bad as an untrained model's, after thousands near zero.
    CHECK_FALSE(guard.check(50.0).has_value());
  }
}

TEST_CASE("LossGuard: a loss past the factor times its usual value is named with both, and NaN and infinity always are") {
  LossGuard guard(1000.0);
  for (const double loss : {2.3, 2.2, 2.4, 2.1}) REQUIRE_FALSE(guard.check(loss).has_value());
  const auto exploded = guard.check(4e30);
  REQUIRE(exploded.has_value());
  CHECK(exploded->find("the loss is 4e+30") != std::string::npos);
  // The median of an even count is the upper middle one: of 2.1 to 2.4, 2.3.
  CHECK(exploded->find("times its usual 2.3,") != std::string::npos);
  CHECK(exploded->find("divergence factor 1000") != std::string::npos);
  // A rejected loss does not join the medians: the next one is judged alike.
  CHECK(guard.check(2301.0).has_value());
  CHECK_FALSE(guard.check(2299.0).has_value());
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const auto named = guard.check(bad);
    REQUIRE(named.has_value());
    CHECK(named->find("the loss is") != std::string::npos);
  }

  LossGuard off(0.0);  // factor 0: only what is not finite
  CHECK_FALSE(off.check(1.0).has_value());
  CHECK_FALSE(off.check(1e30).has_value());
  CHECK(off.check(std::numeric_limits<double>::quiet_NaN()).has_value());

  LossGuard exact(10.0);  // a loss fitted exactly: 0 is no reference to be a multiple of
  for (int step = 0; step < 10; ++step) REQUIRE_FALSE(exact.check(0.0).has_value());
  CHECK_FALSE(exact.check(0.5).has_value());
}

TEST_CASE("LossGuard: a factor that would stop healthy steps, or is not finite, is refused naming it") {
  for (const double bad : {0.5, 1.0, -3.0, std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    CHECK(throws_error_mentioning([&] { LossGuard guard(bad); }, {"LossGuard", "divergence_factor"}));
  }
}

TEST_CASE("Trainer: a loss that explodes but stays finite stops fit before that step's update, or is skipped") {
  const auto data = test::make_blobs(29, 3);  // batches of 8: 4 steps per epoch
  const auto train = [&](const TrainerOptions& options, WeightsAfterEachStep& steps,
                         std::shared_ptr<layers::Module>& model) {
    model = test::make_classifier(5, false);
    auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1, .momentum = 0.9});
    // The sixth loss (epoch 2, step 2) a million times larger, and finite.
    Trainer trainer(model, poisoned_loss({5}, 1e6f), optimizer, options);
    TensorBatches batches(data.inputs, data.labels, 8);
    return trainer.fit(batches,
                       {.epochs = 2, .callbacks = {std::shared_ptr<WeightsAfterEachStep>(&steps, [](auto*) {})}});
  };
  std::shared_ptr<layers::Module> model;
  WeightsAfterEachStep stopped;
  CHECK(throws_error_mentioning([&] { train(quiet_options(), stopped, model); },
                                {"times its usual", "epoch 2, step 2 of 4", "before this step's update"}));
  REQUIRE(stopped.weights.size() == 5);
  CHECK(flat_parameters(*model) == stopped.weights.back());
  bool reported = false;
  try {
    WeightsAfterEachStep again;
    train(quiet_options(), again, model);
  } catch (const optim::DivergedLoss& error) {
    reported = error.reporter();  // one process: the root, which reports it
  }
  CHECK(reported);

  TrainerOptions skipping = quiet_options();
  skipping.on_non_finite = TrainerOptions::OnNonFinite::skip;
  WeightsAfterEachStep skipped;
  const optim::History history = train(skipping, skipped, model);
  CHECK(history.series("skipped_steps") == std::vector<double>{0.0, 1.0});
  REQUIRE(skipped.weights.size() == 8);
  CHECK(skipped.weights[5] == skipped.weights[4]);  // the sixth step changed nothing

  TrainerOptions off = quiet_options();
  off.divergence_factor = 0.0;
  WeightsAfterEachStep trained_on;
  train(off, trained_on, model);
  CHECK(trained_on.weights.size() == 8);
  CHECK(trained_on.weights[5] != trained_on.weights[4]);
}
