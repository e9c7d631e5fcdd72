// Learning-rate schedules and scaling rules (optim/schedule.hpp): each
// schedule's value at chosen steps, warm-up around another schedule, apply()
// driving an optimizer, the linear and square-root rules, bad arguments.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/optim/schedule.hpp>
#include <ddl/optim/sgd.hpp>

#include <cmath>
#include <memory>
#include <numbers>

#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::optim;
using ddl::test::throws_error_mentioning;

TEST_CASE("optim::ConstantLr: gives the same rate at every step") {
  const ConstantLr schedule(0.25);
  for (const std::int64_t step : {0, 1, 17, 100000}) CHECK(schedule.lr_at(step) == 0.25);
}

TEST_CASE("optim::StepLr: multiplies by gamma every step_size steps") {
  const StepLr schedule(0.1, 30, 0.1);
  CHECK(schedule.lr_at(0) == doctest::Approx(0.1));
  CHECK(schedule.lr_at(29) == doctest::Approx(0.1));
  CHECK(schedule.lr_at(30) == doctest::Approx(0.01));
  CHECK(schedule.lr_at(59) == doctest::Approx(0.01));
  CHECK(schedule.lr_at(60) == doctest::Approx(0.001));
  CHECK(StepLr(1.0, 2, 0.5).lr_at(7) == doctest::Approx(0.125));
}

TEST_CASE("optim::CosineLr: anneals from the base rate to the minimum and stays there") {
  const CosineLr schedule(1.0, 100, 0.1);
  CHECK(schedule.lr_at(0) == doctest::Approx(1.0));
  CHECK(schedule.lr_at(50) == doctest::Approx(0.55));
  CHECK(schedule.lr_at(25) == doctest::Approx(0.1 + 0.9 * 0.5 * (1.0 + std::cos(std::numbers::pi / 4))));
  CHECK(schedule.lr_at(100) == doctest::Approx(0.1));
  CHECK(schedule.lr_at(150) == doctest::Approx(0.1));
}

TEST_CASE("optim::LinearWarmup: ramps from start_factor times the target to the target, then follows it") {
  const auto target = std::make_shared<StepLr>(0.8, 10, 0.5);
  // Goyal et al.: 8 workers start at the single-worker rate 0.1.
  const LinearWarmup goyal(target, 4, 1.0 / 8.0);
  CHECK(goyal.lr_at(0) == doctest::Approx(0.1));
  CHECK(goyal.lr_at(2) == doctest::Approx(0.8 * (0.125 + 0.875 * 0.5)));
  CHECK(goyal.lr_at(4) == doctest::Approx(0.8));
  CHECK(goyal.lr_at(10) == doctest::Approx(0.4));  // the target's own step count
  const LinearWarmup from_zero(std::make_shared<ConstantLr>(1.0), 5);
  CHECK(from_zero.lr_at(0) == 0.0);
  CHECK(from_zero.lr_at(1) == doctest::Approx(0.2));
  CHECK(from_zero.lr_at(5) == doctest::Approx(1.0));
  CHECK(LinearWarmup(std::make_shared<ConstantLr>(0.3), 0).lr_at(0) == doctest::Approx(0.3));
}

TEST_CASE("optim::LrSchedule: a schedule applied to an optimizer sets its learning rate") {
  const Tensor w = ones({3}).set_requires_grad();
  SGD optimizer({w}, {.lr = 1.0});
  const CosineLr schedule(0.5, 10);
  schedule.apply(optimizer, 5);
  CHECK(optimizer.lr() == doctest::Approx(0.25));
  w.set_grad(ones({3}));
  optimizer.step();
  CHECK(w.to_vector<float>() == std::vector<float>(3, 0.75f));
}

TEST_CASE(
    "optim::scale_lr_linear and scale_lr_sqrt: the linear rule scales by the batch ratio and the square-root rule by "
    "its root") {
  CHECK(scale_lr_linear(0.1, 1) == doctest::Approx(0.1));
  CHECK(scale_lr_linear(0.1, 8) == doctest::Approx(0.8));
  CHECK(scale_lr_linear(1.0, 256) == doctest::Approx(256.0));
  CHECK(scale_lr_sqrt(0.1, 1) == doctest::Approx(0.1));
  CHECK(scale_lr_sqrt(0.1, 4) == doctest::Approx(0.2));
  CHECK(scale_lr_sqrt(1.0, 2) == doctest::Approx(std::sqrt(2.0)));
  // A batch smaller than the tuned one, or not a multiple of it.
  CHECK(scale_lr_linear(0.3, 0.5) == doctest::Approx(0.15));
  CHECK(scale_lr_sqrt(4.7331e-4, 1000.0 / 75.0) == doctest::Approx(4.7331e-4 * std::sqrt(1000.0 / 75.0)));
}

TEST_CASE("optim::LrSchedule: schedules and scaling rules reject bad arguments naming the value") {
  CHECK(throws_error_mentioning([] { ConstantLr(-0.1); }, {"ConstantLr", "-0.1"}));
  CHECK(throws_error_mentioning([] { StepLr(0.1, 0); }, {"StepLr", "step_size", "0"}));
  CHECK(throws_error_mentioning([] { CosineLr(0.1, 100, 0.5); }, {"CosineLr", "min_lr", "0.5"}));
  CHECK(throws_error_mentioning([] { CosineLr(0.1, -3); }, {"CosineLr", "total_steps", "-3"}));
  CHECK(throws_error_mentioning([] { LinearWarmup(std::make_shared<ConstantLr>(1.0), 5, 1.5); },
                                {"LinearWarmup", "start_factor", "1.5"}));
  CHECK(throws_error_mentioning([] { ConstantLr(1.0).lr_at(-1); }, {"ConstantLr", "-1"}));
  CHECK(throws_error_mentioning([] { scale_lr_linear(0.1, 0); }, {"scale_lr_linear", "batch_ratio", "0"}));
  CHECK(throws_error_mentioning([] { scale_lr_sqrt(0.1, -2); }, {"scale_lr_sqrt", "batch_ratio", "-2"}));
  CHECK(throws_error_mentioning([] { scale_lr_sqrt(0.1, std::nan("")); }, {"scale_lr_sqrt", "batch_ratio", "nan"}));
}
