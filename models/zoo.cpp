#include <ddl/layers/activation.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/models/zoo.hpp>

namespace ddl::models {

using namespace layers;

std::shared_ptr<Sequential> mnist_cnn(Generator* generator) {
  auto model = std::make_shared<Sequential>();
  model->emplace<Conv2d>(1, 32, Conv2dOptions{.kernel_size = 3}, generator)
      .emplace<ReLU>()
      .emplace<Conv2d>(32, 64, Conv2dOptions{.kernel_size = 3}, generator)
      .emplace<ReLU>()
      .emplace<MaxPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Dropout>(0.25f, generator)
      .emplace<Flatten>()
      .emplace<Dense>(9216, 128, true, generator)
      .emplace<ReLU>()
      .emplace<Dropout>(0.5f, generator)
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

}  // namespace ddl::models
