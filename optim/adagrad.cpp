// Adagrad: checks its hyper-parameters and launches kernels::AdagradUpdate.
#include <ddl/optim/adagrad.hpp>

#include <ddl/core/backend.hpp>
#include <ddl/optim/update_kernels.hpp>

namespace ddl::optim {

namespace {
// Checked before the base allocates state filled with it.
double checked_initial(double initial) {
  detail::check_hyper_parameter(initial >= 0.0, "Adagrad", "initial_accumulator", initial, "must be >= 0");
  return initial;
}
}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& options)
    : Optimizer("Adagrad", std::move(params), options.lr, {"sum_squares"},
                checked_initial(options.initial_accumulator)),
      options_(options) {
  detail::check_hyper_parameter(options.epsilon > 0.0, "Adagrad", "epsilon", options.epsilon, "must be > 0");
  detail::check_hyper_parameter(options.weight_decay >= 0.0, "Adagrad", "weight_decay", options.weight_decay,
                                "must be >= 0");
}

void Adagrad::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) {
  const kernels::AdagradUpdate kernel{param.data<float>(),
                                      grad.data<float>(),
                                      state[0].data<float>(),
                                      static_cast<float>(lr),
                                      static_cast<float>(options_.epsilon),
                                      static_cast<float>(options_.weight_decay)};
  backend::launch(param.device(), param.numel(), kernel);
}

}  // namespace ddl::optim
