// Known architectures built from ddl layers have exactly the parameter
// counts their papers and Keras report, and run end to end.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/layers/summary.hpp>

using namespace ddl;
using namespace ddl::layers;

namespace {

// The Keras / Horovod MNIST example.
Sequential keras_mnist_cnn() {
  Sequential model;
  model.emplace<Conv2d>(1, 32, Conv2dOptions{.kernel_size = 3})
      .emplace<ReLU>()
      .emplace<Conv2d>(32, 64, Conv2dOptions{.kernel_size = 3})
      .emplace<ReLU>()
      .emplace<MaxPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Dropout>(0.25f)
      .emplace<Flatten>()
      .emplace<Dense>(9216, 128)
      .emplace<ReLU>()
      .emplace<Dropout>(0.5f)
      .emplace<Dense>(128, 10);
  return model;
}

// LeNet-5 (LeCun et al. 1998) on 28x28 input padded to 32x32 by the first
// convolution, average pooling, tanh.
Sequential lenet5() {
  Sequential model;
  model.emplace<Conv2d>(1, 6, Conv2dOptions{.kernel_size = 5, .padding = 2})
      .emplace<Tanh>()
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Conv2d>(6, 16, Conv2dOptions{.kernel_size = 5})
      .emplace<Tanh>()
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Flatten>()
      .emplace<Dense>(400, 120)
      .emplace<Tanh>()
      .emplace<Dense>(120, 84)
      .emplace<Tanh>()
      .emplace<Dense>(84, 10);
  return model;
}

}  // namespace

TEST_CASE("the Keras MNIST CNN has 1,199,882 parameters and its summary says so") {
  Sequential model = keras_mnist_cnn();
  CHECK(model.parameter_count() == 1199882);
  const std::string text = summary(model, {1, 28, 28});
  CHECK(text.find("(None, 32, 26, 26)") != std::string::npos);
  CHECK(text.find("(None, 64, 12, 12)") != std::string::npos);
  CHECK(text.find("(None, 9216)") != std::string::npos);
  CHECK(text.find("1,179,776") != std::string::npos);  // the big Dense layer
  CHECK(text.find("Total params: 1,199,882") != std::string::npos);
}

TEST_CASE("LeNet-5 has 61,706 parameters") {
  Sequential model = lenet5();
  CHECK(model.parameter_count() == 61706);
  CHECK(summary(model, {1, 28, 28}).find("(None, 16, 5, 5)") != std::string::npos);
}

TEST_CASE("the Keras MNIST CNN trains: a few SGD steps on one batch lower its loss") {
  Generator generator(8);
  Sequential model = keras_mnist_cnn();
  const Tensor images = uniform({8, 1, 28, 28}, 0.0f, 1.0f, {}, &generator);
  const Tensor labels = from_vector(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, {8});
  model.eval();  // no dropout: the loss must fall monotonically on one batch
  float first = 0.0f, last = 0.0f;
  for (int step = 0; step < 5; ++step) {
    const Tensor loss = cross_entropy(model(images), labels);
    (step == 0 ? first : last) = loss.item();
    model.zero_grad();
    loss.backward();
    const NoGradGuard no_grad;
    for (const Tensor& p : model.parameters()) p.copy_from(p - p.grad() * 0.05f);
  }
  CHECK(last < first);
}
