// Learning-rate schedules, with warm-up and the linear and square-root
// scaling rules for many ranks: a schedule maps a step (or epoch:
// the caller decides the unit) to a learning rate, which the trainer hands
// to Optimizer::set_lr.
#pragma once

#include <cstdint>
#include <memory>

namespace ddl::optim {

class Optimizer;

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr_at(std::int64_t step) const = 0;
  // Sets the optimizer's learning rate to lr_at(step).
  void apply(Optimizer& optimizer, std::int64_t step) const;
};

class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(double lr);
  double lr_at(std::int64_t step) const override;

 private:
  double lr_;
};

// base * gamma^(step / step_size), the integer division making a staircase
// (the ResNet recipe: gamma 0.1 every 30 epochs).
class StepLr : public LrSchedule {
 public:
  StepLr(double base_lr, std::int64_t step_size, double gamma = 0.1);
  double lr_at(std::int64_t step) const override;

 private:
  double base_lr_;
  std::int64_t step_size_;
  double gamma_;
};

// Cosine annealing without restarts (Loshchilov & Hutter 2017):
// min + (base - min) (1 + cos(pi t / T)) / 2, held at min after T.
class CosineLr : public LrSchedule {
 public:
  CosineLr(double base_lr, std::int64_t total_steps, double min_lr = 0.0);
  double lr_at(std::int64_t step) const override;

 private:
  double base_lr_;
  std::int64_t total_steps_;
  double min_lr_;
};

// Gradual warm-up (Goyal et al. 2017, "Accurate, Large Minibatch SGD"):
// for step < warmup_steps the target schedule's rate is scaled by a factor
// rising linearly from start_factor (at step 0) to 1 (at warmup_steps);
// afterwards the target schedule runs unchanged, on the same step count.
// Goyal et al. start at the single-worker rate, i.e. start_factor = 1/k for
// a rate scaled by k workers, and warm up over 5 epochs.
class LinearWarmup : public LrSchedule {
 public:
  LinearWarmup(std::shared_ptr<const LrSchedule> target, std::int64_t warmup_steps, double start_factor = 0.0);
  double lr_at(std::int64_t step) const override;

 private:
  std::shared_ptr<const LrSchedule> target_;
  std::int64_t warmup_steps_;
  double start_factor_;
};

// Scaling a learning rate tuned at one batch size to a batch `batch_ratio`
// times larger (the global batch over the batch the rate was tuned for: the
// rank count when each rank keeps the tuned batch).
//
// Linear rule (Goyal et al. 2017): lr * batch_ratio. Keeps the expected
// update per sample the same; it holds for SGD up to batches of about 8k on
// ImageNet and needs warm-up, since early training changes too fast for a
// large step.
double scale_lr_linear(double base_lr, double batch_ratio);
// Square-root rule (Krizhevsky 2014; Hoffer et al. 2017): lr * sqrt(batch_ratio).
// Keeps the variance of the update the same; more conservative, often the
// better fit for adaptive optimizers (Adam, Adagrad). Neither rule holds
// indefinitely: past a problem-dependent "critical batch size" (McCandlish
// et al. 2018) larger batches stop paying off, and LARS/LAMB-style
// per-layer rates are needed.
double scale_lr_sqrt(double base_lr, double batch_ratio);

}  // namespace ddl::optim
