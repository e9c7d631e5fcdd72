// The single-process strategy (see strategy.hpp): this process's data, plain
// forward and backward, nothing to synchronise.
#include <ddl/optim/engine/strategy.hpp>

#include <ddl/core/ops.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/optim/engine/callback.hpp>
#include <ddl/optim/optimizer.hpp>

namespace ddl::optim {

Device Strategy::device(DeviceType type) { return Device(type, 0); }

void Strategy::prepare(layers::Module& /*model*/, Optimizer* /*optimizer*/) {}

void Strategy::begin_epoch(BatchSource& data, std::int64_t epoch) { data.begin_epoch(epoch, shard()); }

std::optional<Batch> Strategy::next_batch(BatchSource& data) { return data.next(); }

void Strategy::begin_step(layers::Module& model) { model.zero_grad(); }

StepOutput Strategy::forward_backward(layers::Module& model, const LossFunction& loss, const Batch& batch,
                                      const StepShare& share) {
  // This class's forward, not an override: a strategy that changes how
  // evaluation runs (a pipeline) schedules training in its own
  // forward_backward.
  StepOutput result = [&] {
    const timeline::Span span("compute", "forward");
    return Strategy::forward(model, batch, loss);
  }();
  backward(result, share);
  return result;
}

void Strategy::backward(const StepOutput& result, const StepShare& share) {
  const timeline::Span span("compute", "backward");
  // A whole step (no accumulation) skips the multiplication: bit for bit
  // what a plain loss.backward() computes.
  if (share.loss_scale == 1.0) {
    result.loss.backward();
  } else {
    (result.loss * static_cast<float>(share.loss_scale)).backward();
  }
}

void Strategy::synchronize_gradients(layers::Module& /*model*/) {}

void Strategy::update(layers::Module& /*model*/, Optimizer& optimizer) { optimizer.step(); }

StepOutput Strategy::forward(layers::Module& model, const Batch& batch, const LossFunction& loss) {
  StepOutput result;
  result.output = model(batch.inputs);
  if (loss) result.loss = loss(result.output, batch.targets);
  return result;
}

void Strategy::gather_state(const layers::Module& /*model*/, TrainingState& /*state*/) {}

void Strategy::select_state(const layers::Module& /*model*/, TrainingState& /*state*/) {}

void Strategy::sum_over_ranks(std::vector<double>& /*values*/) {}

std::string Strategy::describe(std::int64_t /*shard_batch*/) const { return {}; }

std::vector<std::shared_ptr<Callback>> Strategy::callbacks(const layers::Module& /*model*/) { return {}; }

std::string Strategy::report(const layers::Module& /*model*/, const Optimizer& /*optimizer*/) { return {}; }

}  // namespace ddl::optim
