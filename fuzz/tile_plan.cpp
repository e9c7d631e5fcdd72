// parallel::plan_tiles and tiled_forward on models and options built from
// bytes: byte 0 the image's height, byte 1 its width (1-48 each), byte 2
// how to cut (grid, tile size, window or budget, with bytes 3-4 as its two
// numbers) and byte 5 the halo (-1 to 22); then 3 bytes per layer (its kind,
// then two bytes of its geometry): convolutions of any kernel, stride,
// padding and dilation, max and average pooling with padding and ceil_mode,
// nearest upsampling by 1 to 3, ReLU, and residual blocks. A plan is a ddl::Error or one whose tiles own
// every output pixel once and read inside the image on the stride, and whose
// stitched output (for plans of at most 64 tiles) equals the whole image's to
// float32 rounding.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include <ddl/ddl.hpp>

#include "support.hpp"

namespace {

using namespace ddl;

// One layer from three bytes; `channels` is updated to its output's.
std::shared_ptr<layers::Module> make_layer(const std::uint8_t* bytes, std::int64_t& channels, Generator& generator) {
  const int kind = bytes[0] % 6;
  const std::int64_t a = bytes[1], b = bytes[2];
  const auto conv = [&](std::int64_t in, std::int64_t out, std::int64_t kernel_rows, std::int64_t kernel_cols,
                        std::int64_t stride, std::int64_t padding, std::int64_t dilation) {
    return std::make_shared<layers::Conv2d>(
        in, out,
        layers::Conv2dOptions{
            .kernel_size = {kernel_rows, kernel_cols}, .stride = stride, .padding = padding, .dilation = dilation},
        &generator);
  };
  switch (kind) {
    case 0: {
      const std::int64_t out = 1 + a % 2;
      auto layer = conv(channels, out, 1 + a / 2 % 5, 1 + b % 5, 1 + b / 5 % 3, a / 10 % 4, 1 + b / 15 % 3);
      channels = out;
      return layer;
    }
    case 1:
    case 2: {
      const std::int64_t kernel = 1 + a % 4;
      const layers::Pool2dOptions options{.kernel_size = kernel,
                                          .stride = b % 4,
                                          .padding = a / 4 % (kernel / 2 + 1),
                                          .ceil_mode = (b & 4) != 0,
                                          .count_include_pad = (b & 8) != 0};
      if (kind == 1) return std::make_shared<layers::MaxPool2d>(options);
      return std::make_shared<layers::AvgPool2d>(options);
    }
    case 3:
      return std::make_shared<layers::ReLU>();
    case 4:
      return std::make_shared<layers::Upsample2d>(1 + a % 3);
    default: {
      // A body of one convolution that keeps or halves the size, and a 1x1
      // shortcut of the same stride where it halves.
      const std::int64_t stride = 1 + a % 2, kernel = 1 + 2 * (b % 3);
      auto body = conv(channels, channels, kernel, kernel, stride, kernel / 2, 1);
      std::shared_ptr<layers::Module> shortcut;
      if (stride > 1) shortcut = conv(channels, channels, 1, 1, stride, 0, 1);
      return std::make_shared<layers::Residual>(body, shortcut);
    }
  }
}

parallel::TilingOptions options_from(const std::uint8_t* bytes) {
  parallel::TilingOptions options{.halo = static_cast<std::int64_t>(bytes[3] % 24) - 1};
  const std::int64_t x = bytes[1] % 12, y = bytes[2] % 12;
  switch (bytes[0] % 5) {
    case 0:
      options.grid_rows = x, options.grid_cols = y;
      break;
    case 1:
      options.tile_rows = x, options.tile_cols = y;
      break;
    case 2:
      options.window_rows = 4 * x, options.window_cols = 4 * y;
      break;
    case 3:
      options.memory_budget = static_cast<std::size_t>(x * 1024 + y * 65536);
      break;
    default:
      break;
  }
  return options;
}

double relative_difference(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  double difference = 0, scale = 1e-30;
  for (std::size_t i = 0; i < x.size(); ++i) {
    difference = std::max(difference, std::abs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::abs(static_cast<double>(y[i])));
  }
  return difference / scale;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 6) return 0;
  const std::int64_t height = 1 + data[0] % 48, width = 1 + data[1] % 48;
  Generator generator(1);
  layers::Sequential model;
  std::int64_t channels = 1;
  if (!fuzz::parses([&] {
        for (std::size_t at = 6; at + 3 <= size && model.size() < 6; at += 3) {
          model.add(make_layer(data + at, channels, generator));
        }
      })) {
    return 0;
  }
  const Shape input{1, 1, height, width};
  parallel::TilePlan plan;
  if (!fuzz::parses([&] { plan = parallel::plan_tiles(model, input, options_from(data + 2)); })) return 0;

  const parallel::SpatialModel spatial(model);
  std::vector<int> owners(static_cast<std::size_t>(plan.output[2] * plan.output[3]), 0);
  for (const parallel::Tile& tile : plan.tiles) {
    const auto& in = tile.input;
    fuzz::require(
        in.rows.begin >= 0 && in.cols.begin >= 0 && in.rows.end <= height && in.cols.end <= width && in.pixels() > 0,
        "plan_tiles: a tile reads inside the image");
    fuzz::require(in.rows.begin % plan.field.rows.stride == 0 && in.cols.begin % plan.field.cols.stride == 0,
                  "plan_tiles: a tile starts on the stride");
    const Shape computed = spatial.output_shape({1, 1, in.rows.size(), in.cols.size()});
    fuzz::require(tile.keep.rows.begin >= 0 && tile.keep.cols.begin >= 0 && tile.keep.rows.end <= computed[2] &&
                      tile.keep.cols.end <= computed[3],
                  "plan_tiles: a tile computes what it keeps");
    for (std::int64_t r = tile.output.rows.begin; r < tile.output.rows.end; ++r) {
      for (std::int64_t c = tile.output.cols.begin; c < tile.output.cols.end; ++c) ++owners[r * plan.output[3] + c];
    }
  }
  fuzz::require(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; }),
                "plan_tiles: every output pixel has one owner");

  // Running thousands of one-pixel tiles, or images upsampled to gigabytes,
  // would only slow the search.
  if (plan.tiles.size() > 64 || plan.whole_image.total() > (std::size_t{64} << 20)) return 0;
  const Tensor image = uniform(input, -1.0f, 1.0f, {}, &generator);
  model.eval();
  Tensor whole;
  {
    NoGradGuard no_grad;
    whole = model(image);
  }
  fuzz::require(whole.shape() == plan.output, "plan_tiles: the plan's output shape is the model's");
  const Tensor tiled = parallel::tiled_forward(model, image, plan, {cpu()});
  fuzz::require(relative_difference(tiled, whole) <= 1e-5, "tiled_forward equals the whole image");
  return 0;
}
