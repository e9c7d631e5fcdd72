// Adam: checks its hyper-parameters, computes the step's bias corrections in
// double and launches kernels::AdamUpdate.
#include <ddl/optim/adam.hpp>

#include <ddl/core/backend.hpp>
#include <ddl/optim/update_kernels.hpp>

#include <cmath>

namespace ddl::optim {

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Optimizer("Adam", std::move(params), options.lr, {"exp_avg", "exp_avg_sq"}), options_(options) {
  detail::check_hyper_parameter(options.beta1 >= 0.0 && options.beta1 < 1.0, "Adam", "beta1", options.beta1,
                                "must be in [0, 1)");
  detail::check_hyper_parameter(options.beta2 >= 0.0 && options.beta2 < 1.0, "Adam", "beta2", options.beta2,
                                "must be in [0, 1)");
  detail::check_hyper_parameter(options.epsilon > 0.0, "Adam", "epsilon", options.epsilon, "must be > 0");
  detail::check_hyper_parameter(options.weight_decay >= 0.0, "Adam", "weight_decay", options.weight_decay,
                                "must be >= 0");
}

void Adam::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) {
  const double t = static_cast<double>(step_count() + 1);
  const double bias1 = 1.0 - std::pow(options_.beta1, t);
  const double bias2 = 1.0 - std::pow(options_.beta2, t);
  const kernels::AdamUpdate kernel{param.data<float>(),
                                   grad.data<float>(),
                                   state[0].data<float>(),
                                   state[1].data<float>(),
                                   static_cast<float>(options_.beta1),
                                   static_cast<float>(options_.beta2),
                                   static_cast<float>(options_.epsilon),
                                   static_cast<float>(options_.weight_decay),
                                   static_cast<float>(lr / bias1),
                                   static_cast<float>(1.0 / std::sqrt(bias2))};
  backend::launch(param.device(), param.numel(), kernel);
}

}  // namespace ddl::optim
