// Bundled model architectures, each a function returning a Sequential built
// from ddl layers, with its parameter count in the comment (tested).
#pragma once

#include <memory>

#include <ddl/core/random.hpp>
#include <ddl/layers/sequential.hpp>

namespace ddl::models {

// The Keras / Horovod MNIST example for 1x28x28 images, 10 classes:
// Conv 32 3x3, ReLU, Conv 64 3x3, ReLU, MaxPool 2, Dropout .25, Flatten,
// Dense 128, ReLU, Dropout .5, Dense 10. 1,199,882 parameters.
std::shared_ptr<layers::Sequential> mnist_cnn(Generator* generator = nullptr);

// LeNet-5 (LeCun et al. 1998) for 1x28x28 images, padded to 32x32 by the
// first convolution: Conv 6 5x5, tanh, AvgPool 2, Conv 16 5x5, tanh,
// AvgPool 2, Dense 120, tanh, Dense 84, tanh, Dense 10. 61,706 parameters.
std::shared_ptr<layers::Sequential> lenet5(Generator* generator = nullptr);

}  // namespace ddl::models
