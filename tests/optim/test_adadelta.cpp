// Adadelta (optim/adadelta.hpp) against a double reference of Keras /
// TensorFlow's ApplyAdadelta, its Keras defaults, state round trip, bad
// hyper-parameters and device agreement.
#include "optim_harness.hpp"

#include <ddl/optim/adadelta.hpp>

using namespace ddl;
using namespace ddl::test::optim;
using ddl::test::throws_error_mentioning;

namespace {

std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)> adadelta(
    ddl::optim::AdadeltaOptions options) {
  return [options](std::vector<Tensor> params) {
    return std::make_unique<ddl::optim::Adadelta>(std::move(params), options);
  };
}

// tf.raw_ops.ApplyAdadelta, written out: state[0] = E[g^2], state[1] = E[dx^2].
ReferenceUpdate adadelta_reference(double lr, double rho, double eps, double weight_decay) {
  return [=](std::vector<double>& p, const std::vector<double>& g, std::vector<std::vector<double>>& state, int) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double d = g[i] + weight_decay * p[i];
      state[0][i] = rho * state[0][i] + (1.0 - rho) * d * d;
      const double update = std::sqrt(state[1][i] + eps) / std::sqrt(state[0][i] + eps) * d;
      state[1][i] = rho * state[1][i] + (1.0 - rho) * update * update;
      p[i] -= lr * update;
    }
  };
}

}  // namespace

TEST_CASE("optim::Adadelta: defaults are Keras's: lr 1.0, rho 0.95, epsilon 1e-7") {
  const ddl::optim::Adadelta optimizer(make_params());
  CHECK(optimizer.lr() == 1.0);
  CHECK(optimizer.options().rho == 0.95);
  CHECK(optimizer.options().epsilon == 1e-7);
}

TEST_CASE("optim::Adadelta: with Keras defaults follows the TensorFlow update") {
  // Early Adadelta steps are about sqrt(eps) in size: compare with an
  // absolute tolerance well below that.
  check_against_reference(adadelta({}), adadelta_reference(1.0, 0.95, 1e-7, 0.0), 2, 0.0, 4, 1e-6);
}

TEST_CASE("optim::Adadelta: with a larger epsilon, another rho and weight decay follows the TensorFlow update") {
  check_against_reference(adadelta({.lr = 0.5, .rho = 0.9, .epsilon = 1e-3, .weight_decay = 0.1}),
                          adadelta_reference(0.5, 0.9, 1e-3, 0.1), 2);
}

TEST_CASE("optim::Adadelta: resumed from its state continues as an uninterrupted run") {
  check_resume(adadelta({.epsilon = 1e-4}));
}

TEST_CASE("optim::Adadelta: on two devices gives bitwise-equal parameters") { check_devices_agree(adadelta({})); }

TEST_CASE("optim::Adadelta: rejects rho outside 0 to 1, epsilon <= 0 and a negative lr") {
  const std::vector<Tensor> params = make_params();
  CHECK(throws_error_mentioning([&] { ddl::optim::Adadelta(params, {.rho = 1.5}); }, {"Adadelta", "rho", "1.5"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adadelta(params, {.rho = -0.2}); }, {"Adadelta", "rho", "-0.2"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adadelta(params, {.epsilon = 0.0}); }, {"Adadelta", "epsilon", "0"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::Adadelta(params, {.lr = -1.0}); }, {"Adadelta", "lr", "-1"}));
}

TEST_CASE("optim::Adadelta: cut into slices (keep_slices) it steps each element as the whole does") {
  check_slices(adadelta({.epsilon = 1e-4}));
}
