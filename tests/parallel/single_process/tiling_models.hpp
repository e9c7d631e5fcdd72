// Small fully-convolutional models for the tiling tests, one per kind of
// geometry: dilation, stride and pooling (ceil_mode, padding), residual
// blocks with batch norm, an encoder-decoder with upsampling; and what the
// single-process and the MPI tiling tests compare tiles with.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>

#include <ddl/ddl.hpp>

namespace ddl::test {

// Conv 3x3 dilations 1, 2, 4 (padding = dilation), ReLU after each, then a
// 1x1 head to 3 channels: stride 1, reach 7 on every side.
inline std::shared_ptr<layers::Sequential> dilated_model(std::int64_t channels, Generator& generator) {
  auto model = std::make_shared<layers::Sequential>();
  std::int64_t in = channels;
  for (std::int64_t dilation : {1, 2, 4}) {
    model->add(std::make_shared<layers::Conv2d>(
        in, 6, layers::Conv2dOptions{.kernel_size = 3, .padding = dilation, .dilation = dilation}, &generator));
    model->add(std::make_shared<layers::ReLU>());
    in = 6;
  }
  model->add(std::make_shared<layers::Conv2d>(6, 3, layers::Conv2dOptions{.kernel_size = 1}, &generator));
  return model;
}

// A strided convolution, max pooling with padding and ceil_mode, an
// unpadded rectangular convolution, average pooling with padding: stride 8.
inline std::shared_ptr<layers::Sequential> strided_model(std::int64_t channels, Generator& generator) {
  auto model = std::make_shared<layers::Sequential>();
  model->add(std::make_shared<layers::Conv2d>(
      channels, 5, layers::Conv2dOptions{.kernel_size = 3, .stride = 2, .padding = 1}, &generator));
  model->add(std::make_shared<layers::Tanh>());
  model->add(std::make_shared<layers::MaxPool2d>(
      layers::Pool2dOptions{.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true}));
  model->add(std::make_shared<layers::Conv2d>(5, 4, layers::Conv2dOptions{.kernel_size = {3, 2}}, &generator));
  model->add(std::make_shared<layers::Sigmoid>());
  model->add(std::make_shared<layers::AvgPool2d>(layers::Pool2dOptions{.kernel_size = 2, .padding = 1}));
  return model;
}

// Conv, batch norm, a basic block, a strided basic block with a projection
// shortcut, dropout and a softmax over the channels, with batch-norm
// statistics that are not the identity's.
inline std::shared_ptr<layers::Sequential> residual_model(std::int64_t channels, Generator& generator) {
  auto model = std::make_shared<layers::Sequential>();
  model->add(
      std::make_shared<layers::Conv2d>(channels, 4, layers::Conv2dOptions{.kernel_size = 3, .padding = 1}, &generator));
  model->add(std::make_shared<layers::BatchNorm2d>(4));
  model->add(std::make_shared<layers::ReLU>());
  model->add(layers::basic_block(4, 4, 1, &generator));
  model->add(layers::basic_block(4, 6, 2, &generator));
  model->add(std::make_shared<layers::Dropout>(0.3f));
  model->add(std::make_shared<layers::Softmax>(1));
  std::vector<layers::NamedTensor> statistics;
  for (const auto& [name, tensor] : model->named_buffers()) {
    const bool variance = name.ends_with("running_var");
    statistics.emplace_back(name,
                            uniform(tensor.shape(), variance ? 0.5f : -0.5f, variance ? 2.0f : 0.5f, {}, &generator));
  }
  model->load_state_dict(statistics, false);
  return model;
}

// An encoder-decoder: conv, max pool 2, conv, avg pool 2 (stride 4), conv,
// then upsampling by 2 twice with a convolution between: the output has the
// input's size (for sides divisible by 4) and the tiles must start on
// multiples of 4.
inline std::shared_ptr<layers::Sequential> encoder_decoder_model(std::int64_t channels, Generator& generator) {
  auto model = std::make_shared<layers::Sequential>();
  const auto conv = [&](std::int64_t in, std::int64_t out) {
    return std::make_shared<layers::Conv2d>(in, out, layers::Conv2dOptions{.kernel_size = 3, .padding = 1}, &generator);
  };
  model->add(conv(channels, 4));
  model->add(std::make_shared<layers::ReLU>());
  model->add(std::make_shared<layers::MaxPool2d>(layers::Pool2dOptions{.kernel_size = 2}));
  model->add(conv(4, 6));
  model->add(std::make_shared<layers::Tanh>());
  model->add(std::make_shared<layers::AvgPool2d>(layers::Pool2dOptions{.kernel_size = 2}));
  model->add(conv(6, 6));
  model->add(std::make_shared<layers::Upsample2d>(2));
  model->add(conv(6, 4));
  model->add(std::make_shared<layers::ReLU>());
  model->add(std::make_shared<layers::Upsample2d>(2));
  model->add(conv(4, 3));
  return model;
}

using ModelMaker = std::shared_ptr<layers::Sequential> (*)(std::int64_t, Generator&);

// model(input) in evaluation mode: what the stitched tiles must equal.
inline Tensor whole_image(layers::Module& model, const Tensor& input) {
  model.eval();
  NoGradGuard no_grad;
  return model(input);
}

// The largest |a - b| over |b|'s largest element: the measure of
// how far tiles may round from the whole image (at most 1e-6).
inline double relative_difference(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  double difference = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    difference = std::max(difference, std::abs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::abs(static_cast<double>(y[i])));
  }
  return difference / scale;
}

}  // namespace ddl::test
