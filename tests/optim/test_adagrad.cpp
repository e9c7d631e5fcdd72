// Adagrad (optim/adagrad.hpp) against a double reference of PyTorch's
// update, with and without an initial accumulator and weight decay; state
// round trip, bad hyper-parameters and device agreement.
#include "optim_harness.hpp"

#include <ddl/optim/adagrad.hpp>

using namespace ddl;
using namespace ddl::test::optim;
using ddl::test::throws_error_mentioning;

namespace {

std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)> adagrad(ddl::optim::AdagradOptions options) {
  return [options](std::vector<Tensor> params) {
    return std::make_unique<ddl::optim::Adagrad>(std::move(params), options);
  };
}

// torch.optim.Adagrad (lr_decay 0), written out: state[0] = sum of g^2.
ReferenceUpdate adagrad_reference(double lr, double eps, double weight_decay) {
  return [=](std::vector<double>& p, const std::vector<double>& g, std::vector<std::vector<double>>& state, int) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double d = g[i] + weight_decay * p[i];
      state[0][i] += d * d;
      p[i] -= lr * d / (std::sqrt(state[0][i]) + eps);
    }
  };
}

}  // namespace

TEST_CASE("optim::Adagrad: with PyTorch defaults follows the PyTorch update") {
  const ddl::optim::Adagrad defaults(make_params());
  CHECK(defaults.lr() == 0.01);
  CHECK(defaults.options().epsilon == 1e-10);
  check_against_reference(adagrad({}), adagrad_reference(0.01, 1e-10, 0.0), 1);
}

TEST_CASE("optim::Adagrad: with Keras's initial accumulator and weight decay follows the update") {
  check_against_reference(adagrad({.lr = 0.3, .initial_accumulator = 0.1, .epsilon = 1e-7, .weight_decay = 0.02}),
                          adagrad_reference(0.3, 1e-7, 0.02), 1, 0.1);
}

TEST_CASE("optim::Adagrad: resumed from its state continues as an uninterrupted run") {
  check_resume(adagrad({.lr = 0.1, .initial_accumulator = 0.1}));
}

TEST_CASE("optim::Adagrad: on two devices gives bitwise-equal parameters") {
  check_devices_agree(adagrad({.lr = 0.1}));
}

TEST_CASE("optim::Adagrad: rejects epsilon <= 0, a negative initial accumulator and a negative lr") {
  const std::vector<Tensor> params = make_params();
  CHECK(throws_error_mentioning([&] { ddl::optim::Adagrad(params, {.epsilon = -1e-3}); },
                                {"Adagrad", "epsilon", "-0.001"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adagrad(params, {.initial_accumulator = -0.5}); },
                                {"Adagrad", "initial_accumulator", "-0.5"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adagrad(params, {.lr = -2.0}); }, {"Adagrad", "lr", "-2"}));
}

TEST_CASE("optim::Adagrad: cut into slices (keep_slices) it steps each element as the whole does") {
  check_slices(adagrad({.lr = 0.1, .initial_accumulator = 0.1}));
}
