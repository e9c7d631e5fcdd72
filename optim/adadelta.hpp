// Adadelta (Zeiler 2012) with Keras / TensorFlow semantics and defaults
// (lr 1.0, rho 0.95, epsilon 1e-7), which the Keras/Horovod MNIST example
// trains with; the update is kernels::AdadeltaUpdate.
#pragma once

#include <ddl/optim/optimizer.hpp>

namespace ddl::optim {

struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.95;          // in [0, 1)
  double epsilon = 1e-7;      // > 0
  double weight_decay = 0.0;  // L2 coefficient added to the gradient
};

class Adadelta : public Optimizer {
 public:
  explicit Adadelta(std::vector<Tensor> params, const AdadeltaOptions& options = {});
  const AdadeltaOptions& options() const { return options_; }

 protected:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) override;

 private:
  AdadeltaOptions options_;
};

}  // namespace ddl::optim
