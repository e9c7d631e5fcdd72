// Prints the Keras-style summaries of the bundled architectures:
// the Keras/Horovod MNIST CNN (1,199,882 parameters) and LeNet-5 (61,706).
#include <ddl/ddl.hpp>
#include <ddl/layers/summary.hpp>
#include <ddl/models/zoo.hpp>

#include <cstdio>

int main() {
  std::printf("mnist_cnn\n%s\n", ddl::layers::summary(*ddl::models::mnist_cnn(), {1, 28, 28}).c_str());
  std::printf("lenet5\n%s", ddl::layers::summary(*ddl::models::lenet5(), {1, 28, 28}).c_str());
  return 0;
}
