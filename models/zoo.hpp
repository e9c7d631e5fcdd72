// Bundled model architectures, each a function returning a Sequential built
// from ddl layers, with its parameter count in the comment (tested), and
// make_model() to build one by name; model_layers() describes one as a
// LayerList, so a pipeline stage builds only its own layers. `generator` is used only while building,
// to initialise the weights (nullptr: ddl::default_generator()); dropout
// layers draw from ddl::default_generator(), whose state Trainer checkpoints
// keep, so the model holds no pointer to the caller's generator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ddl/core/random.hpp>
#include <ddl/layers/layer_list.hpp>
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

// The materials-science MLP for the stress–strain task (stress_strain.hpp:
// [N, 200, 3] curves -> [N, 2] material parameters): Flatten, Dense 600->200,
// ReLU, Dense 200->128, ReLU, Dense 128->64, ReLU, Dense 64->2.
// 154,314 parameters. The study it comes from trained it with Adam, learning
// rate 4.7331e-4, batch 75.
std::shared_ptr<layers::Sequential> materials_mlp(Generator* generator = nullptr);

// A small ResNet (He et al. 2016) for 1x28x28 images, 10 classes: conv 3x3
// 1->16 (padding 1, no bias), BatchNorm2d, ReLU, then basic blocks 16->16
// (28x28), 16->32 stride 2 (14x14), 32->64 stride 2 (7x7), the last two with
// projection shortcuts; global average pooling (AvgPool 7), Flatten, Dense
// 64->10. 77,754 parameters, plus 672 batch-norm running statistics.
std::shared_ptr<layers::Sequential> resnet_small(Generator* generator = nullptr);

// A deep, wide MLP for 1x28x28 images, 10 classes, big enough that spreading
// it over devices or pipeline stages matters: Flatten, Dense 784->4096,
// ReLU, six times (Dense 4096->4096, ReLU), Dense 4096->10. 103,944,202
// parameters (397 MiB in float32; Adadelta's state doubles that again).
std::shared_ptr<layers::Sequential> wide_mlp(Generator* generator = nullptr);

// A fully-convolutional segmentation network: the basic context module of
// Yu & Koltun 2016 ("Multi-Scale Context Aggregation by Dilated
// Convolutions"), for 1xHxW images of any size and the kShapesClasses classes
// of synthetic_shapes.hpp: four 3x3 convolutions 16 wide with dilation 1, 2,
// 4, 8 (padding equal to the dilation, so H x W is kept), each followed by
// ReLU, then a 1x1 convolution to 4 logits per pixel (no softmax: the loss
// takes logits). The receptive field grows by 2·dilation per layer to
// 1 + 2·(1 + 2 + 4 + 8) = 31x31 pixels. Only Conv2d and ReLU, so tiled
// inference can analyse it. 7,188 parameters.
std::shared_ptr<layers::Sequential> context_net(Generator* generator = nullptr);

// context_net's encoder-decoder variant, for images of even height and
// width: a 3x3 convolution 16 wide and ReLU at full resolution, max pooling
// 2, the four dilated 3x3 convolutions (1, 2, 4, 8) with ReLU at half
// resolution, where each reaches twice as far for the same cost, nearest
// upsampling 2, a 3x3 convolution and ReLU, and the 1x1 head to 4 logits.
// Receptive field 67x67 pixels (tested), tiles aligned to 2 pixels.
// 11,828 parameters.
std::shared_ptr<layers::Sequential> pooled_context_net(Generator* generator = nullptr);

// The bundled models by name: the names above ("mnist_cnn", "lenet5",
// "materials_mlp", "resnet_small", "wide_mlp", "context_net",
// "pooled_context_net"), so a command line or a
// config file can pick one. An unknown name is an error listing the known
// ones. make_model(name) is model_layers(name).build().
std::shared_ptr<layers::Sequential> make_model(const std::string& name, Generator* generator = nullptr);
layers::LayerList model_layers(const std::string& name);
std::vector<std::string> model_names();

}  // namespace ddl::models
