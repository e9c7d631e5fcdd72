// Tiled inference in one process (parallel/planning/tile_plan.hpp,
// tiled_inference.hpp): tiles stitched together equal the whole image's
// output for dilated, strided, pooled and residual models, grids even and
// uneven, tile sizes, windows and memory budgets, on one or two logical
// devices; what cannot work is refused before any tile runs; the memory
// estimate is what the device's allocator counts.
//
// How exact: pooling, pointwise layers and batch norm compute each output
// from the same values in the same order on a tile as on the whole image, so
// a model of those alone tiles bitwise. The CPU convolution's GEMM (Eigen)
// rounds a pixel's dot product differently depending on where the pixel
// falls in its column blocks, which moves with the image's width, so models
// with convolutions agree to float32 rounding (1e-7 relative measured here),
// and are held to the bound of 1e-6 relative to the output's
// largest value.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <ddl/ddl.hpp>

#include "parallel/single_process/tiling_models.hpp"
#include "support/skip.hpp"

namespace ddl::test {
namespace {

using parallel::plan_tiles;
using parallel::TilingOptions;

enum class Exactness { Bitwise, Rounding };

void check_exact(layers::Module& model, const Tensor& input, const TilingOptions& options,
                 const std::vector<Device>& devices, Exactness exactness = Exactness::Rounding) {
  const Tensor expected = whole_image(model, input);
  const auto plan = plan_tiles(model, input.shape(), options);
  CAPTURE(plan.describe());
  const Tensor tiled = parallel::tiled_forward(model, input, plan, devices);
  REQUIRE(tiled.shape() == expected.shape());
  if (exactness == Exactness::Bitwise) {
    CHECK(tiled.to_vector<float>() == expected.to_vector<float>());
  } else {
    CHECK(relative_difference(tiled, expected) <= 1e-6);
  }
}

TEST_CASE("tiled_forward: grids even and uneven equal the whole image") {
  Generator generator(11);
  for (ModelMaker make : {&dilated_model, &strided_model, &residual_model, &encoder_decoder_model}) {
    const auto model = make(3, generator);
    CAPTURE(model->describe());
    // Extents that no grid divides, and two images so tiles keep the batch.
    const Tensor input = uniform({2, 3, 53, 47}, -1.0f, 1.0f, {}, &generator);
    for (const auto& grid : {std::pair{1L, 2L}, {2L, 2L}, {3L, 1L}, {3L, 4L}, {1L, 1L}}) {
      const std::int64_t rows = grid.first, cols = grid.second;
      CAPTURE(rows);
      CAPTURE(cols);
      check_exact(*model, input, {.grid_rows = rows, .grid_cols = cols}, {cpu(0), cpu(1)});
    }
  }
}

TEST_CASE("tiled_forward: a model without convolutions tiles bitwise") {
  Generator generator(17);
  layers::Sequential model;
  model.add(std::make_shared<layers::AvgPool2d>(layers::Pool2dOptions{.kernel_size = 3, .stride = 1, .padding = 1}));
  model.add(std::make_shared<layers::Tanh>());
  model.add(std::make_shared<layers::MaxPool2d>(
      layers::Pool2dOptions{.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true}));
  model.add(std::make_shared<layers::BatchNorm2d>(3));
  model.add(std::make_shared<layers::AvgPool2d>(
      layers::Pool2dOptions{.kernel_size = 2, .padding = 1, .count_include_pad = false}));
  model.add(std::make_shared<layers::Softmax>(1));
  const Tensor input = uniform({2, 3, 50, 43}, -1.0f, 1.0f, {}, &generator);
  for (const auto& grid : {std::pair{1L, 2L}, {2L, 2L}, {3L, 1L}, {4L, 3L}}) {
    const std::int64_t rows = grid.first, cols = grid.second;
    CAPTURE(rows);
    CAPTURE(cols);
    check_exact(model, input, {.grid_rows = rows, .grid_cols = cols}, {cpu(0), cpu(1)}, Exactness::Bitwise);
  }
}

TEST_CASE("tiled_forward: tile sizes, windows, budgets and wide halos are exact too") {
  Generator generator(12);
  const auto model = dilated_model(2, generator);
  const Tensor input = uniform({1, 2, 45, 38}, -1.0f, 1.0f, {}, &generator);
  SUBCASE("a tile size whose last tiles are smaller") {
    check_exact(*model, input, {.tile_rows = 10, .tile_cols = 7}, {cpu(1)});
  }
  SUBCASE("a window of input pixels, halo included") {
    check_exact(*model, input, {.window_rows = 20, .window_cols = 16}, {cpu(0)});
  }
  SUBCASE("a memory budget of a third of the whole image's") {
    const auto whole = plan_tiles(*model, input.shape(), {});
    const auto options = TilingOptions{.memory_budget = whole.whole_image.total() / 3};
    const auto plan = plan_tiles(*model, input.shape(), options);
    CHECK(plan.tiles.size() > 1);
    CHECK(plan.largest_tile.total() <= options.memory_budget);
    check_exact(*model, input, options, {cpu(0), cpu(1)});
  }
  SUBCASE("a halo wider than needed") {
    check_exact(*model, input, {.grid_rows = 2, .grid_cols = 3, .halo = 11}, {cpu(0)});
  }
}

TEST_CASE("plan_tiles: the tiles own every output pixel once and read inside the image") {
  Generator generator(13);
  const auto model = strided_model(1, generator);
  const Shape input{1, 1, 90, 77};
  const auto plan = plan_tiles(*model, input, {.grid_rows = 3, .grid_cols = 2});
  const auto& field = plan.field;
  REQUIRE(plan.tiles.size() == 6);
  std::vector<int> owners(static_cast<std::size_t>(plan.output[2] * plan.output[3]), 0);
  double read = 0;
  for (const auto& tile : plan.tiles) {
    for (std::int64_t r = tile.output.rows.begin; r < tile.output.rows.end; ++r) {
      for (std::int64_t c = tile.output.cols.begin; c < tile.output.cols.end; ++c) ++owners[r * plan.output[3] + c];
    }
    CHECK(tile.input.rows.begin >= 0);
    CHECK(tile.input.cols.end <= input[3]);
    // Each tile starts on the stride, so its layers' windows line up with
    // the whole image's.
    CHECK(tile.input.rows.begin % field.rows.alignment == 0);
    CHECK(tile.input.cols.begin % field.cols.alignment == 0);
    CHECK(tile.keep.rows.size() == tile.output.rows.size());
    read += static_cast<double>(tile.input.pixels());
  }
  CHECK(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; }));
  CHECK(plan.read_ratio() == doctest::Approx(read / (90.0 * 77.0)));
  CHECK(plan.read_ratio() > 1.0);
}

TEST_CASE("plan_tiles: no tile reads more than the window, whatever the stride and alignment") {
  Generator generator(20);
  const Shape input{1, 1, 97, 83};
  for (ModelMaker make : {&dilated_model, &strided_model, &encoder_decoder_model}) {
    const auto model = make(1, generator);
    const auto field = parallel::receptive_field(*model);
    CAPTURE(field.describe());
    for (const std::int64_t window : {40L, 57L, 90L}) {
      CAPTURE(window);
      const auto plan = plan_tiles(*model, input, {.window_rows = window, .window_cols = window});
      for (const auto& tile : plan.tiles) {
        CHECK(tile.input.rows.size() <= window);
        CHECK(tile.input.cols.size() <= window);
      }
      check_exact(*model, uniform(input, -1.0f, 1.0f, {}, &generator), {.window_rows = window, .window_cols = window},
                  {cpu(1)});
    }
  }
}

TEST_CASE("tiled_forward: the model keeps its device and training mode") {
  Generator generator(14);
  const auto model = residual_model(1, generator);
  model->train();
  const Tensor input = uniform({1, 1, 20, 24}, -1.0f, 1.0f, {}, &generator);
  const auto plan = plan_tiles(*model, input.shape(), {.grid_rows = 2});
  parallel::tiled_forward(*model, input, plan, {cpu(1)});
  CHECK(model->is_training());
  for (const auto& [name, tensor] : model->state_dict()) CHECK(tensor.device() == cpu(0));
}

TEST_CASE("plan_tiles: what cannot be exact is refused, with what would work") {
  Generator generator(15);
  const auto model = dilated_model(1, generator);  // reaches 7 on every side
  const Shape input{1, 1, 40, 30};
  SUBCASE("a halo one pixel too small, with the halo needed on each side") {
    CHECK_THROWS_WITH_AS(
        plan_tiles(*model, input, {.grid_rows = 2, .halo = 6}),
        doctest::Contains("a halo of 6 pixels is too small for this model, whose receptive field is "
                          "15x15 pixels, stride 1x1, reaching 7 above, 7 below, 7 left, 7 right: exact "
                          "tiles need 7 above, 7 below, 7 left, 7 right"),
        Error);
    CHECK_NOTHROW(plan_tiles(*model, input, {.grid_rows = 2, .halo = 7}));
  }
  SUBCASE("a model with a Dense layer") {
    layers::Sequential classifier;
    classifier.add(std::make_shared<layers::Conv2d>(1, 2, layers::Conv2dOptions{}, &generator));
    classifier.add(std::make_shared<layers::Flatten>());
    classifier.add(std::make_shared<layers::Dense>(2 * 38 * 28, 3, true, &generator));
    CHECK_THROWS_WITH_AS(plan_tiles(classifier, input, {.grid_rows = 2}), doctest::Contains("layer '1' (Flatten)"),
                         Error);
  }
  SUBCASE("a window too small to own an output pixel, with the smallest window") {
    CHECK_THROWS_WITH_AS(plan_tiles(*model, input, {.window_rows = 14}),
                         doctest::Contains("a window of 14 input rows is too small: with the halo (7 before, 7 after, "
                                           "stride 1) it owns no output pixel; the smallest window is 15"),
                         Error);
    CHECK(plan_tiles(*model, input, {.window_rows = 15}).grid_rows == 40);
  }
  SUBCASE("a grid finer than the output, with the most that works") {
    CHECK_THROWS_WITH_AS(plan_tiles(*model, input, {.grid_rows = 2, .grid_cols = 31}),
                         doctest::Contains("use at most 30 columns"), Error);
  }
  SUBCASE("a memory budget below the smallest tile's need") {
    CHECK_THROWS_WITH_AS(
        plan_tiles(*model, input, {.memory_budget = 1000}),
        doctest::Contains("cannot hold even a tile of one output pixel, which reads 15x15 input pixels"), Error);
  }
  SUBCASE("two ways of cutting at once, and negative sizes") {
    CHECK_THROWS_WITH_AS(plan_tiles(*model, input, {.grid_rows = 2, .memory_budget = 1 << 20}),
                         doctest::Contains("not a grid and a memory budget"), Error);
    CHECK_THROWS_WITH_AS(plan_tiles(*model, input, {.tile_cols = -3}),
                         doctest::Contains("tile_cols must not be negative, got -3"), Error);
  }
  SUBCASE("an input too small for the model") {
    CHECK_THROWS_WITH_AS(plan_tiles(*strided_model(1, generator), {1, 1, 5, 5}, {}),
                         doctest::Contains("cannot run on an input of"), Error);
  }
  SUBCASE("an input of another shape than the plan's") {
    const auto plan = plan_tiles(*model, input, {.grid_rows = 2});
    CHECK_THROWS_WITH_AS(
        parallel::tiled_forward(*model, zeros({1, 1, 40, 31}), plan, {cpu(0)}),
        doctest::Contains("the input has shape [1, 1, 40, 31], but the plan was made for [1, 1, 40, 30]"), Error);
  }
}

TEST_CASE("SpatialModel::memory: the estimate is what the device's allocator counts") {
  Generator generator(16);
  for (ModelMaker make : {&dilated_model, &strided_model, &residual_model, &encoder_decoder_model}) {
    const auto model = make(2, generator);
    CAPTURE(model->describe());
    const Tensor input = uniform({2, 2, 41, 36}, -1.0f, 1.0f, {}, &generator);
    const parallel::SpatialModel spatial(*model);
    for (const auto& options : {TilingOptions{}, TilingOptions{.grid_rows = 2, .grid_cols = 3}}) {
      const auto plan = plan_tiles(*model, input.shape(), options);
      std::size_t expected = 0;
      for (const auto& tile : plan.tiles) {
        const Shape tile_input{2, 2, tile.input.rows.size(), tile.input.cols.size()};
        expected = std::max(expected, spatial.memory(tile_input, DeviceType::CPU).tensors);
      }
      reset_peak_memory_stats(cpu(1));
      const std::size_t before = memory_stats(cpu(1)).bytes_in_use;
      parallel::tiled_forward(*model, input, plan, {cpu(1)});
      CHECK(memory_stats(cpu(1)).peak_bytes - before == expected);
    }
  }
}

TEST_CASE("SpatialModel::memory: a trained model's gradients travel with it and are counted") {
  Generator generator(19);
  const auto model = encoder_decoder_model(1, generator);
  const Tensor input = uniform({1, 1, 36, 44}, -1.0f, 1.0f, {}, &generator);
  sum((*model)(input)).backward();  // every parameter now holds a gradient
  const auto plan = plan_tiles(*model, input.shape(), {.grid_rows = 2, .grid_cols = 2});
  const parallel::SpatialModel spatial(*model);
  std::size_t expected = 0;
  for (const auto& tile : plan.tiles) {
    expected = std::max(
        expected, spatial.memory({1, 1, tile.input.rows.size(), tile.input.cols.size()}, DeviceType::CPU).tensors);
  }
  CHECK(plan.largest_tile.tensors == expected);
  reset_peak_memory_stats(cpu(1));
  const std::size_t before = memory_stats(cpu(1)).bytes_in_use;
  parallel::tiled_forward(*model, input, plan, {cpu(1)});
  CHECK(memory_stats(cpu(1)).peak_bytes - before == expected);
}

TEST_CASE("tiled_forward: on a CUDA device, tiles agree with the whole image to the devices' own difference" *
          doctest::test_suite("cuda")) {
  if (device_count(DeviceType::CUDA) == 0) return test::skip("needs a CUDA device, and this machine has none");
  Generator generator(18);
  for (ModelMaker make : {&dilated_model, &strided_model, &residual_model, &encoder_decoder_model}) {
    const auto model = make(3, generator);
    CAPTURE(model->describe());
    const Tensor input = uniform({2, 3, 53, 47}, -1.0f, 1.0f, {}, &generator);
    const Tensor on_cpu = whole_image(*model, input);
    const auto whole = plan_tiles(*model, input.shape(), {}, DeviceType::CUDA);
    const Tensor on_gpu = parallel::tiled_forward(*model, input, whole, {cuda(0)});
    // cuDNN picks its algorithm per shape, so a tile may round as either
    // device does: held to twice what the two devices differ by.
    const auto plan = plan_tiles(*model, input.shape(), {.grid_rows = 3, .grid_cols = 2}, DeviceType::CUDA);
    const Tensor tiled = parallel::tiled_forward(*model, input, plan, {cuda(0), cpu(1)});
    const double devices_apart = relative_difference(on_gpu, on_cpu);
    CAPTURE(devices_apart);
    CHECK(relative_difference(tiled, on_cpu) <= 2.0 * devices_apart + 1e-6);
    // The estimate leaves out cuDNN's workspaces, which come on top.
    reset_peak_memory_stats(cuda(0));
    parallel::tiled_forward(*model, input, plan, {cuda(0)});
    const std::size_t peak = memory_stats(cuda(0)).peak_bytes;
    MESSAGE(fmt::format("cuda:0 peak {} bytes, estimate {} without workspaces", peak, plan.largest_tile.tensors));
    CHECK(peak >= plan.largest_tile.tensors);
  }
}

}  // namespace
}  // namespace ddl::test
