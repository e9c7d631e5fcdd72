// The single-process strategy (see strategy.hpp): plain forward and backward,
// nothing to synchronise.
#include <ddl/optim/strategy.hpp>

namespace ddl::optim {

void Strategy::prepare(layers::Module& /*model*/, Optimizer* /*optimizer*/) {}

StepOutput Strategy::forward_backward(layers::Module& model, const LossFunction& loss, const Batch& batch) {
  StepOutput result;
  result.output = model(batch.inputs);
  result.loss = loss(result.output, batch.targets);
  result.loss.backward();
  return result;
}

void Strategy::synchronize_gradients(layers::Module& /*model*/) {}

void Strategy::after_optimizer_step(layers::Module& /*model*/) {}

void Strategy::before_checkpoint(Optimizer& /*optimizer*/) {}

void Strategy::sum_over_ranks(std::vector<double>& /*values*/) {}

}  // namespace ddl::optim
