// SGD (optim/sgd.hpp): plain, momentum, Nesterov and weight-decay runs
// against a double reference of PyTorch's update, the optimizer base
// (skipped parameters, zero_grad, groups, state round trip and its errors),
// bad hyper-parameters, and the same result on two devices.
#include "optim_harness.hpp"

#include <ddl/optim/sgd.hpp>

using namespace ddl;
using namespace ddl::test::optim;
using ddl::test::all_close;
using ddl::test::throws_error_mentioning;

namespace {

std::function<std::unique_ptr<ddl::optim::Optimizer>(std::vector<Tensor>)> sgd(ddl::optim::SgdOptions options) {
  return
      [options](std::vector<Tensor> params) { return std::make_unique<ddl::optim::SGD>(std::move(params), options); };
}

// torch.optim.SGD with dampening 0, written out.
ReferenceUpdate sgd_reference(double lr, double momentum, bool nesterov, double weight_decay) {
  return [=](std::vector<double>& p, const std::vector<double>& g, std::vector<std::vector<double>>& state, int) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + weight_decay * p[i];
      if (momentum > 0.0) {
        state[0][i] = momentum * state[0][i] + d;
        d = nesterov ? d + momentum * state[0][i] : state[0][i];
      }
      p[i] -= lr * d;
    }
  };
}

}  // namespace

TEST_CASE("optim::SGD: without momentum steps against the gradient") {
  check_against_reference(sgd({.lr = 0.1}), sgd_reference(0.1, 0.0, false, 0.0), 0);
}

TEST_CASE("optim::SGD: with momentum follows the PyTorch velocity update") {
  check_against_reference(sgd({.lr = 0.05, .momentum = 0.9}), sgd_reference(0.05, 0.9, false, 0.0), 1);
}

TEST_CASE("optim::SGD: with Nesterov momentum steps along g plus momentum times v") {
  check_against_reference(sgd({.lr = 0.05, .momentum = 0.8, .nesterov = true}), sgd_reference(0.05, 0.8, true, 0.0), 1);
}

TEST_CASE("optim::SGD: weight decay adds the L2 term to the gradient") {
  check_against_reference(sgd({.lr = 0.1, .weight_decay = 0.01}), sgd_reference(0.1, 0.0, false, 0.01), 0);
  check_against_reference(sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.05}),
                          sgd_reference(0.05, 0.9, true, 0.05), 1);
}

TEST_CASE("optim::SGD: on two devices gives bitwise-equal parameters") {
  check_devices_agree(sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01}));
}

TEST_CASE("optim::SGD: resumed from its state continues as an uninterrupted run") {
  check_resume(sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}));
}

TEST_CASE("optim::Optimizer: state names the step counter and each parameter's buffers") {
  const std::vector<Tensor> params = make_params();
  ddl::optim::SGD optimizer(params, {.lr = 0.1, .momentum = 0.5});
  const auto state = optimizer.state();
  REQUIRE(state.size() == 1 + params.size());
  CHECK(state[0].first == "step");
  CHECK(state[0].second.to_vector<std::int64_t>() == std::vector<std::int64_t>{0});
  CHECK(state[4].first == "3.momentum");
  CHECK(state[4].second.shape() == params[3].shape());
  CHECK(ddl::optim::SGD(params, {.lr = 0.1}).state().size() == 1);  // no momentum, no buffers
}

TEST_CASE("optim::Optimizer: load_state rejects a missing, unexpected or misshapen entry and changes nothing") {
  const std::vector<Tensor> params = make_params();
  ddl::optim::SGD optimizer(params, {.lr = 0.1, .momentum = 0.5});
  const auto good = copy_state(optimizer.state());

  auto renamed = good;
  renamed[2].first = "1.velocity";
  CHECK(throws_error_mentioning([&] { optimizer.load_state(renamed); }, {"SGD", "'1.momentum'", "missing"}));

  auto extra = good;
  extra.emplace_back("4.momentum", zeros({3}));
  CHECK(throws_error_mentioning([&] { optimizer.load_state(extra); }, {"SGD", "'4.momentum'", "unexpected"}));

  auto misshapen = good;
  misshapen[2].second = ones({5, 3});
  misshapen[0].second = from_vector(std::vector<std::int64_t>{7}, {1});
  CHECK(throws_error_mentioning([&] { optimizer.load_state(misshapen); }, {"SGD", "'1.momentum'", "[3, 5]", "[5, 3]"}));
  CHECK(optimizer.step_count() == 0);

  auto wrong_dtype = good;
  wrong_dtype[0].second = zeros({1});
  CHECK(throws_error_mentioning([&] { optimizer.load_state(wrong_dtype); }, {"SGD", "'step'"}));
}

TEST_CASE("optim::Optimizer: skips parameters without a gradient and zero_grad drops gradients") {
  const std::vector<Tensor> params = make_params();
  ddl::optim::SGD optimizer(params, {.lr = 0.1, .momentum = 0.9});
  const std::vector<float> before = params[1].to_vector<float>();
  set_grads(params, 0);
  params[1].zero_grad();
  optimizer.step();
  CHECK(params[1].to_vector<float>() == before);
  CHECK(optimizer.state()[2].second.to_vector<float>() == std::vector<float>(15, 0.0f));
  optimizer.zero_grad();
  for (const Tensor& param : params) CHECK_FALSE(param.grad().defined());
}

TEST_CASE("optim::Optimizer: param groups keep their own learning rate until set_lr sets them all") {
  const std::vector<Tensor> params = make_params();
  ddl::optim::SGD optimizer({params[0]}, {.lr = 0.1});
  optimizer.add_param_group({params[1]}, 0.5);
  REQUIRE(optimizer.param_groups().size() == 2);
  const float p0 = params[0].to_vector<float>()[0], p1 = params[1].to_vector<float>()[0];
  params[0].set_grad(ones(params[0].shape()));
  params[1].set_grad(ones(params[1].shape()));
  optimizer.step();
  CHECK(params[0].to_vector<float>()[0] == doctest::Approx(p0 - 0.1f));
  CHECK(params[1].to_vector<float>()[0] == doctest::Approx(p1 - 0.5f));
  optimizer.set_lr(0.25);
  CHECK(optimizer.lr() == 0.25);
  CHECK(optimizer.param_groups()[1].lr == 0.25);
  CHECK(throws_error_mentioning([&] { optimizer.set_lr(-1.0); }, {"SGD", "lr", "-1"}));
}

TEST_CASE(
    "optim::SGD: rejects a negative lr, momentum outside 0 to 1, negative weight decay and Nesterov without momentum") {
  const std::vector<Tensor> params = make_params();
  CHECK(throws_error_mentioning([&] { ddl::optim::SGD(params, {.lr = -0.5}); }, {"SGD", "lr", "-0.5"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::SGD(params, {.momentum = 1.0}); }, {"SGD", "momentum", "1"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::SGD(params, {.momentum = -0.1}); }, {"SGD", "momentum", "-0.1"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::SGD(params, {.weight_decay = -0.01}); },
                                {"SGD", "weight_decay", "-0.01"}));
  CHECK(throws_error_mentioning([&] { ddl::optim::SGD(params, {.nesterov = true}); }, {"SGD", "Nesterov", "0"}));
}

TEST_CASE("optim::SGD: cut into slices (keep_slices) it steps each element as the whole does") {
  check_slices(sgd({.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01}));
}
