// The receptive field (parallel/planning/receptive_field.hpp): known values for each
// kind of layer, and the claim it makes checked against the model itself:
// changing one input pixel changes only the outputs whose field holds it,
// and, for linear models, every one of them.
#include <doctest/doctest.h>

#include <set>
#include <utility>

#include <ddl/ddl.hpp>

#include "parallel/single_process/tiling_models.hpp"

namespace ddl::test {
namespace {

using parallel::AxisReach;
using parallel::receptive_field;

std::shared_ptr<layers::Conv2d> conv(std::int64_t in, std::int64_t out, layers::Conv2dOptions options,
                                     Generator& generator) {
  return std::make_shared<layers::Conv2d>(in, out, options, &generator);
}

// The output pixels (row, col) whose value differs between two [1, K, H, W]
// outputs, in any channel.
std::set<std::pair<std::int64_t, std::int64_t>> changed_pixels(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  const std::int64_t rows = a.size(2), cols = a.size(3);
  std::set<std::pair<std::int64_t, std::int64_t>> changed;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[i])
      changed.emplace((static_cast<std::int64_t>(i) / cols) % rows, static_cast<std::int64_t>(i) % cols);
  }
  return changed;
}

// The output pixels whose receptive field holds input pixel (row, col).
std::set<std::pair<std::int64_t, std::int64_t>> predicted_pixels(const parallel::ReceptiveField& field,
                                                                 const Shape& output, std::int64_t row,
                                                                 std::int64_t col) {
  const auto sees = [](const AxisReach& axis, std::int64_t o, std::int64_t x) {
    const std::int64_t under = o * axis.stride / axis.upsampling;  // floor(o S)
    return under - axis.before <= x && x <= under + axis.after;
  };
  std::set<std::pair<std::int64_t, std::int64_t>> predicted;
  for (std::int64_t r = 0; r < output[2]; ++r) {
    for (std::int64_t c = 0; c < output[3]; ++c) {
      if (sees(field.rows, r, row) && sees(field.cols, c, col)) predicted.emplace(r, c);
    }
  }
  return predicted;
}

// Perturbs input pixels one at a time (corners, edges, interior) and returns
// for each the changed and the predicted output pixels.
template <class Check>
void perturb_pixels(layers::Module& model, const Tensor& input, Check&& check) {
  model.eval();
  NoGradGuard no_grad;
  const Tensor base = model(input);
  const auto field = receptive_field(model);
  const std::int64_t rows = input.size(2), cols = input.size(3);
  for (const auto& [row, col] : {std::pair{0L, 0L},
                                 {rows - 1, cols - 1},
                                 {rows / 2, 0L},
                                 {3L, cols / 2},
                                 {rows / 2, cols / 2 + 1},
                                 {rows - 2, 1L}}) {
    std::vector<float> values = input.to_vector<float>();
    values[static_cast<std::size_t>(row * cols + col)] += 3.0f;  // channel 0
    const Tensor changed = model(from_vector(values, input.shape()));
    check(changed_pixels(base, changed), predicted_pixels(field, base.shape(), row, col), row, col);
  }
}

TEST_CASE("receptive_field: each layer's window, stride and padding") {
  Generator generator(1);
  SUBCASE("a padded 3x3 convolution sees one pixel on each side") {
    const auto field = receptive_field(*conv(1, 1, {.kernel_size = 3, .padding = 1}, generator));
    CHECK(field.rows == AxisReach{.stride = 1, .before = 1, .after = 1});
    CHECK(field.cols == AxisReach{.stride = 1, .before = 1, .after = 1});
  }
  SUBCASE("without padding the window starts at the output's own pixel") {
    const auto field = receptive_field(*conv(1, 1, {.kernel_size = {1, 7}}, generator));
    CHECK(field.rows == AxisReach{.stride = 1, .before = 0, .after = 0});
    CHECK(field.cols == AxisReach{.stride = 1, .before = 0, .after = 6});
  }
  SUBCASE("dilation widens the window, stride multiplies what follows") {
    layers::Sequential model;
    model.add(conv(1, 2, {.kernel_size = 3, .stride = 2, .padding = 1}, generator));
    model.add(conv(2, 2, {.kernel_size = 3, .padding = 2, .dilation = 2}, generator));
    const auto field = receptive_field(model);
    // The second layer reaches 2 of its pixels each way: 4 input pixels.
    CHECK(field.rows == AxisReach{.stride = 2, .before = 1 + 2 * 2, .after = 1 + 2 * 2, .alignment = 2});
    CHECK(field.rows.size() == 11);
  }
  SUBCASE("pooling windows, stride defaulting to the kernel") {
    CHECK(receptive_field(layers::MaxPool2d({.kernel_size = 2})).rows ==
          AxisReach{.stride = 2, .before = 0, .after = 1, .alignment = 2});
    CHECK(receptive_field(layers::AvgPool2d({.kernel_size = 3, .stride = 1, .padding = 1})).cols ==
          AxisReach{.stride = 1, .before = 1, .after = 1});
  }
  SUBCASE("pointwise layers add nothing; a residual block sees what either branch sees") {
    auto model = residual_model(2, generator);
    const auto field = receptive_field(*model);
    // conv 3x3 (1), a block of two (2), a strided block: its first conv
    // reaches 1, its second 1 of the first's pixels, 2 input pixels (3); the
    // 1x1 projection beside them reaches 0.
    CHECK(field.rows == AxisReach{.stride = 2, .before = 1 + 2 + 3, .after = 1 + 2 + 3, .alignment = 2});
  }
  SUBCASE("a context module of dilations 1, 2, 4 sees 15x15 pixels") {
    CHECK(receptive_field(*dilated_model(1, generator)).rows.size() == 15);
  }
}

TEST_CASE("receptive_field: upsampling makes the stride a fraction, and tiles align to the pooling") {
  Generator generator(6);
  SUBCASE("nearest upsampling by 2 reads input floor(o / 2)") {
    CHECK(receptive_field(layers::Upsample2d(2)).rows == AxisReach{.stride = 1, .upsampling = 2});
  }
  SUBCASE("pool 2, then upsample 2: stride 1, but tiles start on even pixels") {
    layers::Sequential model;
    model.add(std::make_shared<layers::MaxPool2d>(layers::Pool2dOptions{.kernel_size = 2}));
    model.add(std::make_shared<layers::Upsample2d>(2));
    // Output o reads the pool window of o / 2: inputs 2 floor(o / 2) and the
    // next; floor(o) - 1 <= 2 floor(o / 2) <= floor(o).
    CHECK(receptive_field(model).rows == AxisReach{.stride = 1, .before = 1, .after = 1, .alignment = 2});
  }
  SUBCASE("an encoder-decoder: two poolings need tiles on multiples of 4") {
    const auto model = encoder_decoder_model(1, generator);
    const auto field = receptive_field(*model);
    CHECK(field.rows.stride == 1);
    CHECK(field.rows.upsampling == 1);
    CHECK(field.rows.alignment == 4);
  }
}

TEST_CASE("receptive_field: no output outside the field changes when one input pixel does") {
  Generator generator(2);
  for (const auto& model : {dilated_model(2, generator), strided_model(2, generator), residual_model(2, generator),
                            encoder_decoder_model(2, generator)}) {
    CAPTURE(model->describe());
    const Tensor input = uniform({1, 2, 37, 29}, -1.0f, 1.0f, {}, &generator);
    perturb_pixels(*model, input, [](const auto& changed, const auto& predicted, std::int64_t row, std::int64_t col) {
      CAPTURE(row);
      CAPTURE(col);
      for (const auto& pixel : changed) CHECK(predicted.count(pixel) == 1);
    });
  }
}

TEST_CASE("receptive_field: a linear model's outputs change across the whole field") {
  // Without ReLU or max pooling every output in the field depends on the
  // pixel (random weights cancel with probability 0), so the field is tight.
  Generator generator(3);
  layers::Sequential model;
  model.add(conv(2, 3, {.kernel_size = 3, .stride = 2, .padding = 1}, generator));
  model.add(conv(3, 3, {.kernel_size = {3, 5}, .padding = 2, .dilation = 2}, generator));
  model.add(std::make_shared<layers::AvgPool2d>(layers::Pool2dOptions{.kernel_size = 2, .stride = 1}));
  const Tensor input = uniform({1, 2, 41, 35}, -1.0f, 1.0f, {}, &generator);
  perturb_pixels(model, input, [](const auto& changed, const auto& predicted, std::int64_t row, std::int64_t col) {
    CAPTURE(row);
    CAPTURE(col);
    CHECK(changed == predicted);
  });
}

TEST_CASE("receptive_field: a layer that is not fully convolutional is refused, named") {
  Generator generator(4);
  auto classifier = models::mnist_cnn(&generator);
  CHECK_THROWS_WITH_AS(receptive_field(*classifier),
                       doctest::Contains("layer '6' (Flatten) is not: each of its outputs depends on every pixel"),
                       Error);
  layers::Sequential spatial_softmax;
  spatial_softmax.add(std::make_shared<layers::Softmax>(3));
  CHECK_THROWS_WITH_AS(receptive_field(spatial_softmax), doctest::Contains("a softmax over a spatial axis"), Error);
}

TEST_CASE("receptive_field: residual branches that step differently are refused") {
  Generator generator(5);
  auto body = std::make_shared<layers::Sequential>();
  body->add(conv(2, 2, {.kernel_size = 3, .stride = 2, .padding = 1}, generator));
  // A shortcut of stride 1 next to a body of stride 2: the shapes differ, and
  // no tiling could line the two up.
  const auto block = std::make_shared<layers::Residual>(body, conv(2, 2, {.kernel_size = 1}, generator));
  CHECK_THROWS_WITH_AS(receptive_field(*block), doctest::Contains("the body steps 2x2 pixels and the shortcut 1x1"),
                       Error);
}

}  // namespace
}  // namespace ddl::test
