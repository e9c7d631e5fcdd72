// Stochastic gradient descent with momentum, Nesterov momentum and L2 weight
// decay, with PyTorch's torch.optim.SGD semantics (dampening 0); the update
// is kernels::SgdUpdate.
#pragma once

#include <ddl/optim/optimizer.hpp>

namespace ddl::optim {

struct SgdOptions {
  double lr = 0.01;
  double momentum = 0.0;      // in [0, 1); 0 keeps no state
  bool nesterov = false;      // needs momentum > 0
  double weight_decay = 0.0;  // L2 coefficient added to the gradient
};

class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, const SgdOptions& options = {});
  const SgdOptions& options() const { return options_; }

 protected:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) override;

 private:
  SgdOptions options_;
};

}  // namespace ddl::optim
