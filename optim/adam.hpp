// Adam (Kingma & Ba 2015) with PyTorch's semantics and defaults (lr 1e-3,
// betas 0.9 / 0.999, epsilon 1e-8 added after the bias-corrected square
// root, optional L2 weight decay added to the gradient, not AdamW's
// decoupled decay). The bias corrections use the optimizer's step count, as
// Keras's `iterations`. The update is kernels::AdamUpdate.
#pragma once

#include <ddl/optim/optimizer.hpp>

namespace ddl::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;     // in [0, 1)
  double beta2 = 0.999;   // in [0, 1)
  double epsilon = 1e-8;  // > 0
  double weight_decay = 0.0;
};

class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  const AdamOptions& options() const { return options_; }

 protected:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) override;

 private:
  AdamOptions options_;
};

}  // namespace ddl::optim
