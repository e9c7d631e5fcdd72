#include <ddl/core/check.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/residual.hpp>
#include <ddl/models/data/stress_strain.hpp>
#include <ddl/models/zoo.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

namespace ddl::models {

using namespace layers;

std::shared_ptr<Sequential> mnist_cnn(Generator* generator) {
  auto model = std::make_shared<Sequential>();
  model->emplace<Conv2d>(1, 32, Conv2dOptions{.kernel_size = 3}, generator)
      .emplace<ReLU>()
      .emplace<Conv2d>(32, 64, Conv2dOptions{.kernel_size = 3}, generator)
      .emplace<ReLU>()
      .emplace<MaxPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Dropout>(0.25f)
      .emplace<Flatten>()
      .emplace<Dense>(9216, 128, true, generator)
      .emplace<ReLU>()
      .emplace<Dropout>(0.5f)
      .emplace<Dense>(128, 10, true, generator);
  return model;
}

std::shared_ptr<Sequential> lenet5(Generator* generator) {
  auto model = std::make_shared<Sequential>();
  model->emplace<Conv2d>(1, 6, Conv2dOptions{.kernel_size = 5, .padding = 2}, generator)
      .emplace<Tanh>()
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Conv2d>(6, 16, Conv2dOptions{.kernel_size = 5}, generator)
      .emplace<Tanh>()
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Flatten>()
      .emplace<Dense>(400, 120, true, generator)
      .emplace<Tanh>()
      .emplace<Dense>(120, 84, true, generator)
      .emplace<Tanh>()
      .emplace<Dense>(84, 10, true, generator);
  return model;
}

std::shared_ptr<Sequential> materials_mlp(Generator* generator) {
  constexpr std::int64_t kInputs = kStressStrainPoints * 3;  // {strain, stress, flag} per point
  auto model = std::make_shared<Sequential>();
  model->emplace<Flatten>()
      .emplace<Dense>(kInputs, 200, true, generator)
      .emplace<ReLU>()
      .emplace<Dense>(200, 128, true, generator)
      .emplace<ReLU>()
      .emplace<Dense>(128, 64, true, generator)
      .emplace<ReLU>()
      .emplace<Dense>(64, 2, true, generator);
  return model;
}

std::shared_ptr<Sequential> resnet_small(Generator* generator) {
  auto model = std::make_shared<Sequential>();
  model->emplace<Conv2d>(1, 16, Conv2dOptions{.kernel_size = 3, .padding = 1, .bias = false}, generator)
      .emplace<BatchNorm2d>(16)
      .emplace<ReLU>()
      .add(basic_block(16, 16, 1, generator))
      .add(basic_block(16, 32, 2, generator))
      .add(basic_block(32, 64, 2, generator))
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 7})
      .emplace<Flatten>()
      .emplace<Dense>(64, 10, true, generator);
  return model;
}

namespace {

using Factory = std::shared_ptr<Sequential> (*)(Generator*);

const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> models{
      {"mnist_cnn", mnist_cnn}, {"lenet5", lenet5}, {"materials_mlp", materials_mlp}, {"resnet_small", resnet_small}};
  return models;
}

}  // namespace

std::shared_ptr<Sequential> make_model(const std::string& name, Generator* generator) {
  for (const auto& [known, factory] : registry()) {
    if (known == name) return factory(generator);
  }
  detail::fail("make_model: unknown model '{}'; the bundled models are {}", name, fmt::join(model_names(), ", "));
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

}  // namespace ddl::models
