// Adadelta: checks its hyper-parameters and launches kernels::AdadeltaUpdate.
#include <ddl/optim/adadelta.hpp>

#include <ddl/core/backend.hpp>
#include <ddl/optim/update_kernels.hpp>

namespace ddl::optim {

Adadelta::Adadelta(std::vector<Tensor> params, const AdadeltaOptions& options)
    : Optimizer("Adadelta", std::move(params), options.lr, {"accum_grad", "accum_delta"}), options_(options) {
  detail::check_hyper_parameter(options.rho >= 0.0 && options.rho < 1.0, "Adadelta", "rho", options.rho,
                                "must be in [0, 1)");
  detail::check_hyper_parameter(options.epsilon > 0.0, "Adadelta", "epsilon", options.epsilon, "must be > 0");
  detail::check_hyper_parameter(options.weight_decay >= 0.0, "Adadelta", "weight_decay", options.weight_decay,
                                "must be >= 0");
}

void Adadelta::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) {
  const kernels::AdadeltaUpdate kernel{param.data<float>(),
                                       grad.data<float>(),
                                       state[0].data<float>(),
                                       state[1].data<float>(),
                                       static_cast<float>(lr),
                                       static_cast<float>(options_.rho),
                                       static_cast<float>(options_.epsilon),
                                       static_cast<float>(options_.weight_decay)};
  backend::launch(param.device(), param.numel(), kernel);
}

}  // namespace ddl::optim
