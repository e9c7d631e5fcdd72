// SGD: checks its hyper-parameters and launches kernels::SgdUpdate.
#include <ddl/optim/sgd.hpp>

#include <ddl/core/backend.hpp>
#include <ddl/optim/update_kernels.hpp>

namespace ddl::optim {

namespace {
std::vector<std::string> sgd_buffers(const SgdOptions& options) {
  return options.momentum > 0.0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, const SgdOptions& options)
    : Optimizer("SGD", std::move(params), options.lr, sgd_buffers(options)), options_(options) {
  detail::check_hyper_parameter(options.momentum >= 0.0 && options.momentum < 1.0, "SGD", "momentum", options.momentum,
                                "must be in [0, 1)");
  detail::check_hyper_parameter(options.weight_decay >= 0.0, "SGD", "weight_decay", options.weight_decay,
                                "must be >= 0");
  detail::check_hyper_parameter(!options.nesterov || options.momentum > 0.0, "SGD", "momentum", options.momentum,
                                "Nesterov needs momentum > 0");
}

void SGD::update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) {
  const kernels::SgdUpdate kernel{param.data<float>(),
                                  grad.data<float>(),
                                  state.empty() ? nullptr : state[0].data<float>(),
                                  static_cast<float>(lr),
                                  static_cast<float>(options_.momentum),
                                  static_cast<float>(options_.weight_decay),
                                  options_.nesterov};
  backend::launch(param.device(), param.numel(), kernel);
}

}  // namespace ddl::optim
