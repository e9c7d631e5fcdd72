#include <ddl/core/check.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/layer_list.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/residual.hpp>
#include <ddl/layers/upsample2d.hpp>
#include <ddl/models/data/stress_strain.hpp>
#include <ddl/models/data/synthetic_shapes.hpp>
#include <ddl/models/zoo.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

namespace ddl::models {

using namespace layers;

namespace {

LayerList mnist_cnn_layers() {
  LayerList layers;
  layers.emplace_init<Conv2d>(1, 32, Conv2dOptions{.kernel_size = 3})
      .emplace<ReLU>()
      .emplace_init<Conv2d>(32, 64, Conv2dOptions{.kernel_size = 3})
      .emplace<ReLU>()
      .emplace<MaxPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Dropout>(0.25f)
      .emplace<Flatten>()
      .emplace_init<Dense>(9216, 128, true)
      .emplace<ReLU>()
      .emplace<Dropout>(0.5f)
      .emplace_init<Dense>(128, 10, true);
  return layers;
}

LayerList lenet5_layers() {
  LayerList layers;
  layers.emplace_init<Conv2d>(1, 6, Conv2dOptions{.kernel_size = 5, .padding = 2})
      .emplace<Tanh>()
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace_init<Conv2d>(6, 16, Conv2dOptions{.kernel_size = 5})
      .emplace<Tanh>()
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 2})
      .emplace<Flatten>()
      .emplace_init<Dense>(400, 120, true)
      .emplace<Tanh>()
      .emplace_init<Dense>(120, 84, true)
      .emplace<Tanh>()
      .emplace_init<Dense>(84, 10, true);
  return layers;
}

LayerList materials_mlp_layers() {
  constexpr std::int64_t kInputs = kStressStrainPoints * 3;  // {strain, stress, flag} per point
  LayerList layers;
  layers.emplace<Flatten>()
      .emplace_init<Dense>(kInputs, 200, true)
      .emplace<ReLU>()
      .emplace_init<Dense>(200, 128, true)
      .emplace<ReLU>()
      .emplace_init<Dense>(128, 64, true)
      .emplace<ReLU>()
      .emplace_init<Dense>(64, 2, true);
  return layers;
}

LayerList resnet_small_layers() {
  LayerList layers;
  layers.emplace_init<Conv2d>(1, 16, Conv2dOptions{.kernel_size = 3, .padding = 1, .bias = false})
      .emplace<BatchNorm2d>(16)
      .emplace<ReLU>()
      .add([](Generator* generator) { return basic_block(16, 16, 1, generator); })
      .add([](Generator* generator) { return basic_block(16, 32, 2, generator); })
      .add([](Generator* generator) { return basic_block(32, 64, 2, generator); })
      .emplace<AvgPool2d>(Pool2dOptions{.kernel_size = 7})
      .emplace<Flatten>()
      .emplace_init<Dense>(64, 10, true);
  return layers;
}

LayerList wide_mlp_layers() {
  constexpr std::int64_t kWidth = 4096;
  LayerList layers;
  layers.emplace<Flatten>().emplace_init<Dense>(784, kWidth, true).emplace<ReLU>();
  for (int hidden = 1; hidden < 7; ++hidden) layers.emplace_init<Dense>(kWidth, kWidth, true).emplace<ReLU>();
  layers.emplace_init<Dense>(kWidth, 10, true);
  return layers;
}

// The context module of Yu & Koltun 2016, one channel in, a class map out.
LayerList context_net_layers() {
  constexpr std::int64_t kWidth = 16;
  LayerList layers;
  std::int64_t channels = 1;
  for (const std::int64_t dilation : {1, 2, 4, 8}) {
    // Padding equal to the dilation keeps H x W: (H + 2d - 2d - 1) + 1 = H.
    layers
        .emplace_init<Conv2d>(channels, kWidth,
                              Conv2dOptions{.kernel_size = 3, .padding = dilation, .dilation = dilation})
        .emplace<ReLU>();
    channels = kWidth;
  }
  layers.emplace_init<Conv2d>(kWidth, kShapesClasses, Conv2dOptions{.kernel_size = 1});
  return layers;
}

LayerList pooled_context_net_layers() {
  constexpr std::int64_t kWidth = 16;
  LayerList layers;
  layers.emplace_init<Conv2d>(1, kWidth, Conv2dOptions{.kernel_size = 3, .padding = 1})
      .emplace<ReLU>()
      .emplace<MaxPool2d>(Pool2dOptions{.kernel_size = 2});
  for (const std::int64_t dilation : {1, 2, 4, 8}) {
    layers
        .emplace_init<Conv2d>(kWidth, kWidth,
                              Conv2dOptions{.kernel_size = 3, .padding = dilation, .dilation = dilation})
        .emplace<ReLU>();
  }
  layers.emplace<Upsample2d>(2)
      .emplace_init<Conv2d>(kWidth, kWidth, Conv2dOptions{.kernel_size = 3, .padding = 1})
      .emplace<ReLU>()
      .emplace_init<Conv2d>(kWidth, kShapesClasses, Conv2dOptions{.kernel_size = 1});
  return layers;
}

}  // namespace

std::shared_ptr<Sequential> mnist_cnn(Generator* generator) { return mnist_cnn_layers().build(generator); }
std::shared_ptr<Sequential> lenet5(Generator* generator) { return lenet5_layers().build(generator); }
std::shared_ptr<Sequential> materials_mlp(Generator* generator) { return materials_mlp_layers().build(generator); }
std::shared_ptr<Sequential> resnet_small(Generator* generator) { return resnet_small_layers().build(generator); }
std::shared_ptr<Sequential> wide_mlp(Generator* generator) { return wide_mlp_layers().build(generator); }
std::shared_ptr<Sequential> context_net(Generator* generator) { return context_net_layers().build(generator); }
std::shared_ptr<Sequential> pooled_context_net(Generator* generator) {
  return pooled_context_net_layers().build(generator);
}

namespace {

using Layers = LayerList (*)();

const std::vector<std::pair<std::string, Layers>>& registry() {
  static const std::vector<std::pair<std::string, Layers>> models{{"mnist_cnn", mnist_cnn_layers},
                                                                  {"lenet5", lenet5_layers},
                                                                  {"materials_mlp", materials_mlp_layers},
                                                                  {"resnet_small", resnet_small_layers},
                                                                  {"wide_mlp", wide_mlp_layers},
                                                                  {"context_net", context_net_layers},
                                                                  {"pooled_context_net", pooled_context_net_layers}};
  return models;
}

}  // namespace

LayerList model_layers(const std::string& name) {
  for (const auto& [known, layers] : registry()) {
    if (known == name) return layers();
  }
  detail::fail("make_model: unknown model '{}'; the bundled models are {}", name, fmt::join(model_names(), ", "));
}

std::shared_ptr<Sequential> make_model(const std::string& name, Generator* generator) {
  return model_layers(name).build(generator);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry()) names.push_back(name);
  return names;
}

}  // namespace ddl::models
