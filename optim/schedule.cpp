// Learning-rate schedules and the world-size scaling rules.
#include <ddl/optim/schedule.hpp>

#include <ddl/core/check.hpp>
#include <ddl/optim/optimizer.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ddl::optim {

namespace {
void check_rate(const char* schedule, const char* what, double value) {
  DDL_CHECK(std::isfinite(value) && value >= 0.0, "{}: {} = {} is invalid (must be >= 0)", schedule, what, value);
}
void check_batch_ratio(const char* rule, double batch_ratio) {
  DDL_CHECK(std::isfinite(batch_ratio) && batch_ratio > 0.0, "{}: batch_ratio = {} is invalid (must be > 0)", rule,
            batch_ratio);
}
void check_step(const char* schedule, std::int64_t step) {
  DDL_CHECK(step >= 0, "{}: step {} is negative", schedule, step);
}
}  // namespace

void LrSchedule::apply(Optimizer& optimizer, std::int64_t step) const { optimizer.set_lr(lr_at(step)); }

ConstantLr::ConstantLr(double lr) : lr_(lr) { check_rate("ConstantLr", "lr", lr); }

double ConstantLr::lr_at(std::int64_t step) const {
  check_step("ConstantLr", step);
  return lr_;
}

StepLr::StepLr(double base_lr, std::int64_t step_size, double gamma)
    : base_lr_(base_lr), step_size_(step_size), gamma_(gamma) {
  check_rate("StepLr", "base_lr", base_lr);
  DDL_CHECK(step_size > 0, "StepLr: step_size = {} is invalid (must be > 0)", step_size);
  check_rate("StepLr", "gamma", gamma);
}

double StepLr::lr_at(std::int64_t step) const {
  check_step("StepLr", step);
  return base_lr_ * std::pow(gamma_, static_cast<double>(step / step_size_));
}

CosineLr::CosineLr(double base_lr, std::int64_t total_steps, double min_lr)
    : base_lr_(base_lr), total_steps_(total_steps), min_lr_(min_lr) {
  check_rate("CosineLr", "base_lr", base_lr);
  check_rate("CosineLr", "min_lr", min_lr);
  DDL_CHECK(total_steps > 0, "CosineLr: total_steps = {} is invalid (must be > 0)", total_steps);
  DDL_CHECK(min_lr <= base_lr, "CosineLr: min_lr = {} exceeds base_lr = {}", min_lr, base_lr);
}

double CosineLr::lr_at(std::int64_t step) const {
  check_step("CosineLr", step);
  const double progress = static_cast<double>(std::min(step, total_steps_)) / static_cast<double>(total_steps_);
  return min_lr_ + (base_lr_ - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

LinearWarmup::LinearWarmup(std::shared_ptr<const LrSchedule> target, std::int64_t warmup_steps, double start_factor)
    : target_(std::move(target)), warmup_steps_(warmup_steps), start_factor_(start_factor) {
  DDL_CHECK(target_ != nullptr, "LinearWarmup: no target schedule");
  DDL_CHECK(warmup_steps >= 0, "LinearWarmup: warmup_steps = {} is invalid (must be >= 0)", warmup_steps);
  DDL_CHECK(start_factor >= 0.0 && start_factor <= 1.0,
            "LinearWarmup: start_factor = {} is invalid (must be in [0, 1])", start_factor);
}

double LinearWarmup::lr_at(std::int64_t step) const {
  check_step("LinearWarmup", step);
  const double target = target_->lr_at(step);
  if (step >= warmup_steps_) return target;
  const double progress = static_cast<double>(step) / static_cast<double>(warmup_steps_);
  return target * (start_factor_ + (1.0 - start_factor_) * progress);
}

double scale_lr_linear(double base_lr, double batch_ratio) {
  check_rate("scale_lr_linear", "base_lr", base_lr);
  check_batch_ratio("scale_lr_linear", batch_ratio);
  return base_lr * batch_ratio;
}

double scale_lr_sqrt(double base_lr, double batch_ratio) {
  check_rate("scale_lr_sqrt", "base_lr", base_lr);
  check_batch_ratio("scale_lr_sqrt", batch_ratio);
  return base_lr * std::sqrt(batch_ratio);
}

}  // namespace ddl::optim
