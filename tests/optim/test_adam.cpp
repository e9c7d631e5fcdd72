// Adam (optim/adam.hpp) against a double reference of PyTorch's update with
// bias correction, with and without weight decay; state round trip (which
// must restore the step count the bias correction uses), bad
// hyper-parameters and device agreement.
#include "optim_harness.hpp"

#include <ddl/optim/adam.hpp>

using namespace ddl;
using namespace ddl::test::optim;
using ddl::test::throws_error_mentioning;

namespace {

std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)> adam(ddl::optim::AdamOptions options) {
  return
      [options](std::vector<Tensor> params) { return std::make_unique<ddl::optim::Adam>(std::move(params), options); };
}

// torch.optim.Adam (amsgrad off), written out with t the optimizer's step.
ReferenceUpdate adam_reference(double lr, double beta1, double beta2, double eps, double weight_decay) {
  return [=](std::vector<double>& p, const std::vector<double>& g, std::vector<std::vector<double>>& state, int t) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double d = g[i] + weight_decay * p[i];
      state[0][i] = beta1 * state[0][i] + (1.0 - beta1) * d;
      state[1][i] = beta2 * state[1][i] + (1.0 - beta2) * d * d;
      const double m_hat = state[0][i] / (1.0 - std::pow(beta1, t));
      const double v_hat = state[1][i] / (1.0 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  };
}

}  // namespace

TEST_CASE("optim::Adam: with PyTorch defaults follows the bias-corrected update") {
  const ddl::optim::Adam defaults(make_params());
  CHECK(defaults.lr() == 1e-3);
  CHECK(defaults.options().beta1 == 0.9);
  CHECK(defaults.options().beta2 == 0.999);
  CHECK(defaults.options().epsilon == 1e-8);
  check_against_reference(adam({}), adam_reference(1e-3, 0.9, 0.999, 1e-8, 0.0), 2, 0.0, 5);
}

TEST_CASE("optim::Adam: with other betas and weight decay follows the bias-corrected update") {
  check_against_reference(adam({.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9, .epsilon = 1e-6, .weight_decay = 0.1}),
                          adam_reference(0.05, 0.8, 0.9, 1e-6, 0.1), 2, 0.0, 5);
}

TEST_CASE("optim::Adam: resumed from its state continues as an uninterrupted run") { check_resume(adam({.lr = 0.01})); }

TEST_CASE("optim::Adam: on two devices gives bitwise-equal parameters") { check_devices_agree(adam({.lr = 0.01})); }

TEST_CASE("optim::Adam: rejects betas outside 0 to 1, epsilon <= 0 and a negative lr") {
  const std::vector<Tensor> params = make_params();
  CHECK(throws_error_mentioning([&] { ddl::optim::Adam(params, {.beta1 = 1.0}); }, {"Adam", "beta1", "1"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adam(params, {.beta2 = -0.5}); }, {"Adam", "beta2", "-0.5"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adam(params, {.epsilon = 0.0}); }, {"Adam", "epsilon", "0"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adam(params, {.lr = -0.001}); }, {"Adam", "lr", "-0.001"}));
}

TEST_CASE("optim::Adam: cut into slices (keep_slices) it steps each element as the whole does") {
  check_slices(adam({.lr = 0.01, .weight_decay = 0.01}));
}
