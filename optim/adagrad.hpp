// Adagrad (Duchi, Hazan & Singer 2011) with PyTorch's semantics and defaults
// (lr 0.01, initial accumulator 0, epsilon 1e-10 added outside the square
// root; Keras instead starts the accumulator at 0.1 and uses 1e-7: pass
// those to match it). The update is kernels::AdagradUpdate.
#pragma once

#include <ddl/optim/optimizer.hpp>

namespace ddl::optim {

struct AdagradOptions {
  double lr = 0.01;
  double initial_accumulator = 0.0;  // >= 0
  double epsilon = 1e-10;            // > 0
  double weight_decay = 0.0;         // L2 coefficient added to the gradient
};

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(std::vector<Tensor> params, const AdagradOptions& options = {});
  const AdagradOptions& options() const { return options_; }

 protected:
  void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) override;

 private:
  AdagradOptions options_;
};

}  // namespace ddl::optim
