// The bundled architectures (models/zoo.cpp) have exactly the parameter
// counts their papers and Keras report, run end to end, and are found by name;
// context_net keeps the image size and has its stated receptive field.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/layers/summary.hpp>
#include <ddl/models/zoo.hpp>

#include <algorithm>
#include <cmath>

#include "support/test_data.hpp"

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

TEST_CASE("the materials MLP has 154,314 parameters and maps curves to two material parameters") {
  Generator generator(9);
  const auto model = models::materials_mlp(&generator);
  CHECK(model->parameter_count() == 154314);
  const Tensor curves = uniform({7, 200, 3}, -1.0f, 1.0f, {}, &generator);
  CHECK((*model)(curves).shape() == Shape{7, 2});
}

TEST_CASE("the small ResNet has 77,754 parameters and 672 batch-norm statistics") {
  const auto model = models::resnet_small();
  CHECK(model->parameter_count() == 77754);
  std::int64_t statistics = 0;
  for (const auto& [name, buffer] : model->named_buffers()) statistics += buffer.numel();
  CHECK(statistics == 672);
  const std::string text = summary(*model, {1, 28, 28});
  CHECK(text.find("(None, 16, 28, 28)") != std::string::npos);
  CHECK(text.find("(None, 32, 14, 14)") != std::string::npos);
  CHECK(text.find("(None, 64, 7, 7)") != std::string::npos);
  CHECK(text.find("(None, 64, 1, 1)") != std::string::npos);
  CHECK(text.find("Trainable params: 77,754") != std::string::npos);
}

TEST_CASE("the small ResNet maps a batch of images to 10 logits and trains every parameter") {
  Generator generator(10);
  const auto model = models::resnet_small(&generator);
  const Tensor images = uniform({3, 1, 28, 28}, 0.0f, 1.0f, {}, &generator);
  const Tensor logits = (*model)(images);
  CHECK(logits.shape() == Shape{3, 10});
  const Tensor labels = from_vector(std::vector<std::int64_t>{2, 7, 9}, {3});
  model->zero_grad();
  cross_entropy(logits, labels).backward();
  for (const auto& named : model->named_parameters()) {
    const std::string& name = named.first;
    CAPTURE(name);
    const Tensor grad = named.second.grad();
    REQUIRE(grad.defined());
    CHECK(grad.shape() == named.second.shape());
    float largest = 0.0f;
    for (const float g : grad.to_vector<float>()) largest = std::max(largest, std::abs(g));
    CHECK(largest > 0.0f);
  }
}

TEST_CASE("context_net has 7,188 parameters and keeps any image's height and width") {
  const auto model = models::context_net();
  CHECK(model->parameter_count() == 7188);
  const std::string text = summary(*model, {1, 13, 37});
  CHECK(text.find("(None, 16, 13, 37)") != std::string::npos);
  CHECK(text.find("(None, 4, 13, 37)") != std::string::npos);
  CHECK(text.find("dilation=8") != std::string::npos);
}

// How far from the centre of a side x side image (rows, columns) the
// outputs reach that change when the centre pixel moves by `delta`.
std::pair<std::int64_t, std::int64_t> farthest_change(layers::Module& model, std::int64_t side, float delta,
                                                      Generator& generator) {
  const NoGradGuard no_grad;
  const std::int64_t centre = side / 2;
  const Tensor image = test::uniform_tensor({1, 1, side, side}, generator);
  std::vector<float> changed_pixel = image.to_vector<float>();
  changed_pixel[centre * side + centre] += delta;
  const auto before = model(image).to_vector<float>();
  const auto after = model(from_vector(changed_pixel, {1, 1, side, side})).to_vector<float>();
  std::int64_t farthest_y = 0, farthest_x = 0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (before[i] == after[i]) continue;
    const auto pixel = static_cast<std::int64_t>(i) % (side * side);
    farthest_y = std::max(farthest_y, std::abs(pixel / side - centre));
    farthest_x = std::max(farthest_x, std::abs(pixel % side - centre));
  }
  return {farthest_y, farthest_x};
}

TEST_CASE("context_net: a pixel reaches exactly the outputs of its 31x31 receptive field") {
  Generator generator(61);
  const auto model = models::context_net(&generator);
  CHECK(farthest_change(*model, 41, 1.0f, generator) == std::pair<std::int64_t, std::int64_t>{15, 15});
}

TEST_CASE("context_net trains on segmentation: a few SGD steps on one batch lower the per-pixel loss") {
  Generator generator(62);
  const auto model = models::context_net(&generator);
  const Tensor images = test::uniform_tensor({3, 1, 11, 17}, generator);
  // Class 1 wherever the image is bright, else 0: learnable from one pixel.
  const auto pixels = images.to_vector<float>();
  std::vector<std::int64_t> labels;
  for (const float value : pixels) labels.push_back(value > 0.3f ? 1 : 0);
  const Tensor targets = from_vector(labels, {3, 11, 17});
  const auto loss_now = [&] { return cross_entropy((*model)(images), targets); };
  const float first = loss_now().item();
  for (int step = 0; step < 10; ++step) {
    const Tensor loss = loss_now();
    model->zero_grad();
    loss.backward();
    const NoGradGuard no_grad;
    for (const Tensor& p : model->parameters()) p.copy_from(p - p.grad() * 0.1f);
  }
  CHECK(loss_now().item() < 0.8f * first);
}

TEST_CASE("pooled_context_net has 11,828 parameters and keeps an even image's height and width") {
  const auto model = models::pooled_context_net();
  CHECK(model->parameter_count() == 11828);
  const std::string text = summary(*model, {1, 14, 38});
  CHECK(text.find("(None, 16, 7, 19)") != std::string::npos);  // pooled
  CHECK(text.find("(None, 4, 14, 38)") != std::string::npos);
}

TEST_CASE("pooled_context_net: a pixel reaches the outputs of its 67x67 receptive field") {
  // Max pooling passes a change only where it makes the window's maximum,
  // so the pixel moves by 100: some channel after the first ReLU rises. An
  // even output pixel o reads inputs o - 33 .. o + 32, an odd one o - 32 ..
  // o + 33 (nearest upsampling repeats a pooled pixel for two outputs):
  // pixel 41 reaches outputs 9 .. 74. Direct convolutions: a Winograd
  // tile's outputs each read its whole 6x6 input patch, in exact arithmetic
  // with weight 0 outside their 3x3 window, but rounding makes a change
  // anywhere in the patch move their last bits.
  Generator generator(63);
  const auto model = models::pooled_context_net(&generator);
  const config::CpuConvolution before = config::cpu_convolution();
  set_cpu_convolution(config::CpuConvolution::Direct);
  CHECK(farthest_change(*model, 82, 100.0f, generator) == std::pair<std::int64_t, std::int64_t>{33, 33});
  set_cpu_convolution(before);
}

TEST_CASE("wide_mlp has 103,944,202 parameters and trains: two SGD steps on random images lower its loss") {
  // Built at full size, the only size the zoo has (397 MiB of weights, as
  // much of gradients); two steps at batch 8 take 2-7 s on 2 cores, a
  // Dense layer's GEMMs there being bound by reading its weights.
  Generator generator(64);
  const auto model = models::wide_mlp(&generator);
  CHECK(model->parameter_count() == 103944202);
  const std::string text = summary(*model, {1, 28, 28});
  CHECK(text.find("(None, 784)") != std::string::npos);
  CHECK(text.find("(None, 4096)") != std::string::npos);
  CHECK(text.find("16,781,312") != std::string::npos);  // each Dense 4096->4096
  CHECK(text.find("Total params: 103,944,202") != std::string::npos);
  const Tensor images = test::uniform_tensor({8, 1, 28, 28}, generator, 0.0f, 1.0f);
  const Tensor labels = from_vector(std::vector<std::int64_t>{3, 1, 4, 1, 5, 9, 2, 6}, {8});
  optim::SGD sgd(model->parameters(), {.lr = 0.1});
  std::vector<float> losses;
  for (int step = 0; step < 3; ++step) {
    const Tensor logits = (*model)(images);
    REQUIRE(logits.shape() == Shape{8, 10});
    const Tensor loss = cross_entropy(logits, labels);
    losses.push_back(loss.item());
    if (step == 2) break;  // the third forward only measures the second step
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }
  INFO("losses before step 1, step 2 and after: " << losses[0] << ", " << losses[1] << ", " << losses[2]);
  // Here 2.307, 2.077, 1.870: each step lowers the loss by about a tenth.
  CHECK(losses[1] < losses[0]);
  CHECK(losses[2] < losses[1]);
  CHECK(losses[2] < 0.9f * losses[0]);
}

TEST_CASE("make_model builds every bundled model by name and lists the names for an unknown one") {
  CHECK(models::model_names() == std::vector<std::string>{"mnist_cnn", "lenet5", "materials_mlp", "resnet_small",
                                                          "wide_mlp", "context_net", "pooled_context_net"});
  CHECK(models::make_model("lenet5")->parameter_count() == 61706);
  CHECK(models::make_model("materials_mlp")->parameter_count() == 154314);
  CHECK(models::make_model("resnet_small")->parameter_count() == 77754);
  CHECK(models::make_model("mnist_cnn")->parameter_count() == 1199882);
  CHECK(models::make_model("context_net")->parameter_count() == 7188);
  CHECK(models::make_model("pooled_context_net")->parameter_count() == 11828);
  // wide_mlp is counted from its layers alone: building it takes 400 MB.
  std::size_t wide_bytes = 0;
  for (const std::size_t bytes : models::model_layers("wide_mlp").parameter_bytes()) wide_bytes += bytes;
  CHECK(wide_bytes == std::size_t{4} * 103944202);
  CHECK(test::throws_error_mentioning([] { models::make_model("resnet50"); },
                                      {"resnet50", "mnist_cnn", "lenet5", "materials_mlp", "resnet_small"}));
}
