// Residual and basic_block (layers/residual.cpp): the sum and its ReLU,
// gradients through body, shortcut and input by finite differences, the
// shape check, parameter names, and how a summary shows a residual block.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/residual.hpp>

#include <algorithm>
#include <random>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {

// A Dense layer over tensors it is given rather than creates, so gradcheck's
// own leaves can be the parameters of a real module inside a Residual.
class GivenDense : public layers::Module {
 public:
  GivenDense(const Tensor& weight, const Tensor& bias)
      : weight_(register_parameter("weight", weight)), bias_(register_parameter("bias", bias)) {}
  Tensor forward(const Tensor& input) override { return layers::dense(input, weight_, bias_); }
  std::string type_name() const override { return "GivenDense"; }

 private:
  Tensor weight_, bias_;
};

std::shared_ptr<layers::Sequential> dense_tanh(const Tensor& weight, const Tensor& bias) {
  auto body = std::make_shared<layers::Sequential>();
  body->add(std::make_shared<GivenDense>(weight, bias)).emplace<layers::Tanh>();
  return body;
}

std::vector<std::string> parameter_names(const layers::Module& module) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : module.named_parameters()) names.push_back(name);
  return names;
}

}  // namespace

TEST_CASE("Residual with an identity shortcut computes relu(body(x) + x)") {
  Generator generator(31);
  auto body = std::make_shared<layers::Dense>(7, 7, true, &generator);
  layers::Residual block(body);
  const Tensor x = test::uniform_tensor({5, 7}, generator);
  const std::vector<float> branch = (*body)(x).to_vector<float>(), input = x.to_vector<float>();
  std::vector<float> expected(branch.size());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = std::max(0.0f, branch[i] + input[i]);
  const Tensor y = block(x);
  CHECK(y.shape() == Shape{5, 7});
  CHECK(all_close(y, expected, 0, 0));
}

TEST_CASE("Residual without activation returns body(x) + shortcut(x) unchanged") {
  Generator generator(32);
  auto body = std::make_shared<layers::Dense>(3, 5, true, &generator);
  auto shortcut = std::make_shared<layers::Dense>(3, 5, false, &generator);
  layers::Residual block(body, shortcut, layers::ResidualActivation::None);
  const Tensor x = test::uniform_tensor({13, 3}, generator);
  const std::vector<float> branch = (*body)(x).to_vector<float>(), skip = (*shortcut)(x).to_vector<float>();
  std::vector<float> expected(branch.size());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = branch[i] + skip[i];
  CHECK(all_close(block(x), expected, 0, 0));
}

TEST_CASE("Residual gradients match finite differences through input, body and identity shortcut") {
  Generator generator(33);
  std::mt19937 rng(33);
  for (int trial = 0; trial < 3; ++trial) {
    const std::int64_t n = test::awkward_size(rng), features = test::awkward_size(rng);
    CAPTURE(n);
    CAPTURE(features);
    // |x| >= 1.5 and |tanh| < 1 keep every sum at least 0.5 from relu's kink;
    // small weights keep tanh off its flat tails, so the gradients are not ~0.
    const Tensor x = test::away_from_zero_tensor({n, features}, generator) * 3.0f;
    const Tensor w = test::uniform_tensor({features, features}, generator, -0.3f, 0.3f);
    const Tensor b = test::uniform_tensor({features}, generator, -0.3f, 0.3f);
    CHECK(gradcheck(
        [](const std::vector<Tensor>& t) {
          layers::Residual block(dense_tanh(t[1], t[2]));
          return block(t[0]);
        },
        {x, w, b}));
  }
}

TEST_CASE("Residual gradients match finite differences through a projection shortcut") {
  Generator generator(34);
  std::mt19937 rng(34);
  for (int trial = 0; trial < 3; ++trial) {
    const std::int64_t n = test::awkward_size(rng), in = test::awkward_size(rng), out = test::awkward_size(rng);
    CAPTURE(n);
    CAPTURE(in);
    CAPTURE(out);
    const Tensor x = test::uniform_tensor({n, in}, generator);
    const Tensor w = test::uniform_tensor({in, out}, generator, -0.5f, 0.5f);
    const Tensor b = test::uniform_tensor({out}, generator, -0.5f, 0.5f);
    const Tensor p = test::uniform_tensor({in, out}, generator);
    const Tensor q = test::uniform_tensor({out}, generator);
    CHECK(gradcheck(
        [](const std::vector<Tensor>& t) {
          layers::Residual block(dense_tanh(t[1], t[2]), std::make_shared<GivenDense>(t[3], t[4]),
                                 layers::ResidualActivation::None);
          return block(t[0]);
        },
        {x, w, b, p, q}));
  }
}

TEST_CASE("Residual rejects body and shortcut outputs of different shapes, naming both") {
  Generator generator(35);
  layers::Residual narrowing(std::make_shared<layers::Dense>(5, 3, true, &generator));
  CHECK(throws_error_mentioning(
      [&] {
        narrowing(test::uniform_tensor({2, 5}, generator));
      },
      {"Residual", "[2, 3]", "[2, 5]", "identity"}));
  // [2, 4] + [2, 1] would broadcast; a residual sum must not.
  layers::Residual widening(std::make_shared<layers::Dense>(1, 4, true, &generator));
  CHECK(throws_error_mentioning(
      [&] {
        widening(test::uniform_tensor({2, 1}, generator));
      },
      {"Residual", "[2, 4]", "[2, 1]"}));
  CHECK(throws_error_mentioning([] { layers::Residual block(nullptr); }, {"Residual", "body is null"}));
}

TEST_CASE("Residual names its parameters body.* and shortcut.*") {
  auto body = std::make_shared<layers::Sequential>();
  body->emplace<layers::Dense>(4, 6).emplace<layers::Tanh>();
  const layers::Residual block(body, std::make_shared<layers::Dense>(4, 6, false));
  CHECK(parameter_names(block) == std::vector<std::string>{"body.0.weight", "body.0.bias", "shortcut.weight"});
  CHECK(block.parameter_count() == 4 * 6 + 6 + 4 * 6);
  CHECK(parameter_names(layers::Residual(std::make_shared<layers::Dense>(4, 4))) ==
        std::vector<std::string>{"body.weight", "body.bias"});
}

TEST_CASE("basic_block keeps the identity shortcut when shapes match and projects when they do not") {
  Generator generator(36);
  const auto same = layers::basic_block(3, 3, 1, &generator);
  CHECK(same->shortcut() == nullptr);
  CHECK(parameter_names(*same) == std::vector<std::string>{"body.0.weight", "body.1.weight", "body.1.bias",
                                                           "body.3.weight", "body.4.weight", "body.4.bias"});
  CHECK(same->parameter_count() == 2 * (3 * 3 * 9) + 2 * (2 * 3));
  CHECK((*same)(test::uniform_tensor({2, 3, 5, 7}, generator)).shape() == Shape{2, 3, 5, 7});

  const auto down = layers::basic_block(3, 5, 2, &generator);
  REQUIRE(down->shortcut() != nullptr);
  CHECK(parameter_names(*down) ==
        std::vector<std::string>{"body.0.weight", "body.1.weight", "body.1.bias", "body.3.weight", "body.4.weight",
                                 "body.4.bias", "shortcut.0.weight", "shortcut.1.weight", "shortcut.1.bias"});
  CHECK(down->parameter_count() == 3 * 5 * 9 + 5 * 5 * 9 + 3 * 5 + 3 * (2 * 5));
  // Odd extents: the 3x3 (padding 1) and 1x1 paths must round alike.
  CHECK((*down)(test::uniform_tensor({2, 3, 5, 7}, generator)).shape() == Shape{2, 5, 3, 4});
  // Channels change at stride 1: still a projection.
  CHECK(layers::basic_block(3, 5, 1, &generator)->shortcut() != nullptr);
}

TEST_CASE("a summary shows a Residual as one row naming what it holds") {
  auto model = std::make_shared<layers::Sequential>();
  model->add(layers::basic_block(1, 4, 2)).emplace<layers::Flatten>();
  const std::string text = layers::summary(*model, {1, 6, 6});
  CHECK(text.find("0 (Residual(body: Conv2d, BatchNorm2d, ReLU, Conv2d, BatchNorm2d; shortcut: Conv2d, "
                  "BatchNorm2d; activation: ReLU))") != std::string::npos);
  CHECK(text.find("(None, 4, 3, 3)") != std::string::npos);
  CHECK(text.find("(None, 36)") != std::string::npos);
  // A Residual on its own is run whole, not child after child (its shortcut
  // takes the input, not the body's output).
  const std::string alone = layers::summary(*layers::basic_block(1, 4, 2), {1, 6, 6});
  CHECK(alone.find("Model: Residual") != std::string::npos);
  CHECK(alone.find("(None, 4, 3, 3)") != std::string::npos);
}
