// The bundled architectures (models/zoo.cpp) have exactly the parameter
// counts their papers and Keras report, and run end to end.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/layers/summary.hpp>
#include <ddl/models/zoo.hpp>

using namespace ddl;
using namespace ddl::layers;

TEST_CASE("the Keras MNIST CNN has 1,199,882 parameters and its summary says so") {
  const auto holder = models::mnist_cnn();
  Sequential& model = *holder;
  CHECK(model.parameter_count() == 1199882);
  const std::string text = summary(model, {1, 28, 28});
  CHECK(text.find("(None, 32, 26, 26)") != std::string::npos);
  CHECK(text.find("(None, 64, 12, 12)") != std::string::npos);
  CHECK(text.find("(None, 9216)") != std::string::npos);
  CHECK(text.find("1,179,776") != std::string::npos);  // the big Dense layer
  CHECK(text.find("Total params: 1,199,882") != std::string::npos);
}

TEST_CASE("LeNet-5 has 61,706 parameters") {
  const auto holder = models::lenet5();
  Sequential& model = *holder;
  CHECK(model.parameter_count() == 61706);
  CHECK(summary(model, {1, 28, 28}).find("(None, 16, 5, 5)") != std::string::npos);
}

TEST_CASE("the Keras MNIST CNN trains: a few SGD steps on one batch lower its loss") {
  Generator generator(8);
  const auto holder = models::mnist_cnn();
  Sequential& model = *holder;
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
