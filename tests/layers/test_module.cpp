// Module and Sequential (layers/module.cpp, sequential.cpp, summary.cpp):
// stable parameter names, recursive train/eval, in-place moves between
// devices, and the Keras-style summary.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/layers/summary.hpp>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;

namespace {

std::shared_ptr<layers::Sequential> small_mlp() {
  auto model = std::make_shared<layers::Sequential>();
  model->emplace<layers::Dense>(5, 7).emplace<layers::ReLU>().emplace<layers::Dropout>(0.5f).emplace<layers::Dense>(7, 3);
  return model;
}

}  // namespace

TEST_CASE("named_parameters lists every parameter once, in registration order, with dotted names") {
  const auto model = small_mlp();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model->named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"});
  CHECK(model->parameter_count() == 5 * 7 + 7 + 7 * 3 + 3);
  for (const Tensor& p : model->parameters()) CHECK(p.requires_grad());
}

TEST_CASE("train and eval reach every child") {
  const auto model = small_mlp();
  model->eval();
  for (const auto& [name, child] : model->children()) CHECK_FALSE(child->is_training());
  model->train();
  for (const auto& [name, child] : model->children()) CHECK(child->is_training());
}

TEST_CASE("Sequential applies its modules in order") {
  const auto model = small_mlp();
  model->eval();
  Generator generator(2);
  const Tensor x = test::uniform_tensor({4, 5}, generator);
  const auto& first = static_cast<layers::Dense&>((*model)[0]);
  const auto& last = static_cast<layers::Dense&>((*model)[3]);
  const Tensor expected = layers::dense(relu(layers::dense(x, first.weight(), first.bias())), last.weight(), last.bias());
  CHECK(all_close((*model)(x), expected, 0, 0));
}

TEST_CASE("to(device) moves parameters in place, so handles taken before the move follow it") {
  const auto model = small_mlp();
  const std::vector<Tensor> before = model->parameters();
  const std::vector<float> values = before[0].to_vector<float>();
  model->to(cpu(1));
  for (const Tensor& p : before) CHECK(p.device() == cpu(1));
  CHECK(all_close(before[0], values, 0, 0));
  Generator generator(3);
  const Tensor y = (*model)(test::uniform_tensor({2, 5}, generator, -1.0f, 1.0f, cpu(1)));
  CHECK(y.device() == cpu(1));
  sum(y).backward();
  CHECK(before[0].grad().device() == cpu(1));
}

TEST_CASE("summary lists each layer's output shape and parameters, and the totals") {
  const auto model = small_mlp();
  const std::string text = layers::summary(*model, {5});
  CHECK(text.find("0 (Dense(5, 7))") != std::string::npos);
  CHECK(text.find("(None, 7)") != std::string::npos);
  CHECK(text.find("(None, 3)") != std::string::npos);
  CHECK(text.find("Total params: 66") != std::string::npos);
  CHECK(text.find("Trainable params: 66") != std::string::npos);
  CHECK(model->is_training());  // summary restores the mode it found
}

TEST_CASE("activation and Flatten modules apply their ops, with gradients") {
  Generator generator(4);
  const Tensor x = test::away_from_zero_tensor({3, 2, 5, 7}, generator);
  CHECK(all_close(layers::ReLU()(x), relu(x), 0, 0));
  CHECK(all_close(layers::Tanh()(x), tanh(x), 0, 0));
  CHECK(all_close(layers::Sigmoid()(x), sigmoid(x), 0, 0));
  CHECK(all_close(layers::Softmax(1)(x), softmax(x, 1), 0, 0));
  const Tensor flat = layers::Flatten()(x);
  CHECK(flat.shape() == Shape{3, 70});
  CHECK(test::gradcheck([](const std::vector<Tensor>& t) { return layers::Flatten()(t[0]) * 2.0f; }, {x}));
}

TEST_CASE("LogSoftmax applies log_softmax along its dim, stays finite for huge logits, with gradients") {
  Generator generator(5);
  const Tensor x = test::uniform_tensor({3, 5, 7}, generator, -3.0f, 3.0f);
  CHECK(all_close(layers::LogSoftmax(1)(x), log_softmax(x, 1), 0, 0));
  CHECK(all_close(layers::LogSoftmax()(x), log_softmax(x, -1), 0, 0));
  CHECK(layers::LogSoftmax(1).describe() == "LogSoftmax(dim=1)");
  CHECK(layers::Softmax().describe() == "Softmax(dim=-1)");
  // exp(-2e4) underflows to 0 in any precision; the log does not need it:
  // log softmax([1e4, 0, -1e4]) = [0, -1e4, -2e4] up to e^-1e4.
  CHECK(all_close(layers::LogSoftmax()(from_vector({1e4f, 0.0f, -1e4f}, {1, 3})), {0.0f, -1e4f, -2e4f}, 0, 1e-7));
  CHECK(test::gradcheck([](const std::vector<Tensor>& t) { return layers::LogSoftmax(1)(t[0]); },
                        {test::uniform_tensor({2, 7, 3}, generator)}));
}
