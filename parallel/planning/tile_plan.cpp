// Cutting an image into exact tiles (see tile_plan.hpp).
#include <ddl/parallel/planning/tile_plan.hpp>

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/core/error.hpp>

namespace ddl::parallel {
namespace {

// Rounded up, for any sign of `value` (divisor > 0).
std::int64_t ceil_div(std::int64_t value, std::int64_t divisor) {
  return value >= 0 ? (value + divisor - 1) / divisor : -(-value / divisor);
}

// "12.3 MiB", or "850 KiB" below a MiB.
std::string mib(std::size_t bytes) {
  const double value = static_cast<double>(bytes);
  return bytes < (1 << 20) ? fmt::format("{:.0f} KiB", value / 1024) : fmt::format("{:.1f} MiB", value / (1 << 20));
}

// What an owned output pixel needs beyond the input pixels under it: its
// receptive field reaches `before` pixels before floor(o S) and `after`
// after, and the next tile's pixels start at ceil((o + 1) S), which is at
// least floor(o S) + S: a halo of ceil(after + 1 - S) below covers it.
Halo needed_halo(const ReceptiveField& field) {
  const auto after = [](const AxisReach& axis) {
    return std::max<std::int64_t>(
        ceil_div(axis.after * axis.upsampling + axis.upsampling - axis.stride, axis.upsampling), 0);
  };
  return {field.rows.before, after(field.rows), field.cols.before, after(field.cols)};
}

// `extent` pixels in `parts` near-equal ranges, the first ones one larger.
std::vector<PixelRange> split(std::int64_t extent, std::int64_t parts) {
  std::vector<PixelRange> ranges;
  std::int64_t begin = 0;
  for (std::int64_t i = 0; i < parts; ++i) {
    const std::int64_t size = extent / parts + (i < extent % parts ? 1 : 0);
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  return ranges;
}

// `extent` pixels in ranges of `size`, the last one smaller.
std::vector<PixelRange> cut(std::int64_t extent, std::int64_t size) {
  std::vector<PixelRange> ranges;
  for (std::int64_t begin = 0; begin < extent; begin += size) ranges.push_back({begin, std::min(begin + size, extent)});
  return ranges;
}

// One axis as the plan cuts it: the output's extent, the receptive field's
// step and alignment, the halo the tiles read, the input's extent.
struct AxisCut {
  const char* rows_or_cols;  // "rows", "columns"
  std::int64_t extent;
  AxisReach field;
  std::int64_t before, after;  // the halo used
  std::int64_t input_extent;

  std::int64_t floor_input(std::int64_t output) const { return output * field.stride / field.upsampling; }
  std::int64_t ceil_input(std::int64_t output) const { return ceil_div(output * field.stride, field.upsampling); }
  // The most input pixels a tile of `owned` output pixels may read: its
  // own, the halo, up to alignment - 1 more where its start is rounded
  // down, and one more where floor and ceiling of a fraction (upsampling)
  // both round outwards.
  std::int64_t reads(std::int64_t owned) const {
    return ceil_input(owned) + (field.upsampling > 1 ? 1 : 0) + before + after + field.alignment - 1;
  }
  std::int64_t input_for(std::int64_t owned) const { return std::min(input_extent, reads(owned)); }
};

// The input pixels that output pixels `owned` read along one axis, starting
// on a multiple of the alignment, and where `owned` lies in what they
// compute.
struct AxisTile {
  PixelRange input, keep;
};
AxisTile axis_tile(const PixelRange& owned, const AxisCut& axis) {
  const std::int64_t start = axis.floor_input(owned.begin) - axis.before;
  const std::int64_t aligned = start > 0 ? start / axis.field.alignment * axis.field.alignment : 0;
  const PixelRange input{aligned, std::min(axis.ceil_input(owned.end) + axis.after, axis.input_extent)};
  // The global index of the tile's first output: the alignment makes it whole.
  const std::int64_t first = input.begin * axis.field.upsampling / axis.field.stride;
  return {input, {owned.begin - first, owned.end - first}};
}

// Which way of cutting the options ask for.
enum class Mode { Whole, Grid, TileSize, Window, Budget };

Mode mode_of(const TilingOptions& options) {
  std::vector<std::pair<Mode, const char*>> given;
  if (options.grid_rows != 0 || options.grid_cols != 0) given.emplace_back(Mode::Grid, "a grid");
  if (options.tile_rows != 0 || options.tile_cols != 0) given.emplace_back(Mode::TileSize, "a tile size");
  if (options.window_rows != 0 || options.window_cols != 0) given.emplace_back(Mode::Window, "a window");
  if (options.memory_budget != 0) given.emplace_back(Mode::Budget, "a memory budget");
  if (given.size() > 1) {
    throw Error(
        fmt::format("tiled inference: give one way to cut the image (a grid, a tile size, a window or a "
                    "memory budget), not {} and {}",
                    given[0].second, given[1].second));
  }
  return given.empty() ? Mode::Whole : given[0].first;
}

void check_not_negative(std::int64_t value, const char* name) {
  if (value < 0) throw Error(fmt::format("tiled inference: {} must not be negative, got {}", name, value));
}

std::vector<PixelRange> grid_axis(const AxisCut& axis, std::int64_t parts, const Shape& input, const Shape& output) {
  if (parts > axis.extent) {
    throw Error(
        fmt::format("tiled inference: a grid of {} {} needs an output at least {} pixels wide that way, but "
                    "input {} gives output {}: use at most {} {}",
                    parts, axis.rows_or_cols, parts, input, output, axis.extent, axis.rows_or_cols));
  }
  return split(axis.extent, std::max<std::int64_t>(parts, 1));
}

std::vector<PixelRange> window_axis(const AxisCut& axis, std::int64_t window) {
  if (window == 0) return {{0, axis.extent}};
  // The formula's guess, then down to what surely fits.
  const std::int64_t spare = window - axis.before - axis.after - (axis.field.alignment - 1);
  std::int64_t owned = spare > 0 ? spare * axis.field.upsampling / axis.field.stride : 0;
  while (owned > 0 && axis.reads(owned) > window) --owned;
  if (owned < 1) {
    throw Error(fmt::format(
        "tiled inference: a window of {} input {} is too small: with the halo ({} before, {} "
        "after, stride {}{}) it owns no output pixel; the smallest window is {}",
        window, axis.rows_or_cols, axis.before, axis.after, axis.field.step(),
        axis.field.alignment == 1 ? "" : fmt::format(", tiles aligned to {}", axis.field.alignment), axis.reads(1)));
  }
  return cut(axis.extent, owned);
}

// The input a tile owning `side` output pixels along each axis reads at most.
Shape largest_input(const Shape& input, const AxisCut& rows, const AxisCut& cols, std::int64_t side) {
  return {input[0], input[1], rows.input_for(std::min(side, rows.extent)), cols.input_for(std::min(side, cols.extent))};
}

// The largest square tile side whose tile fits `budget`, found by bisection
// (memory grows with the side).
std::int64_t side_for_budget(const SpatialModel& model, const Shape& input, const AxisCut& rows, const AxisCut& cols,
                             std::size_t budget, DeviceType device) {
  const auto need = [&](std::int64_t side) { return model.memory(largest_input(input, rows, cols, side), device); };
  const TileMemory smallest = need(1);
  if (smallest.total() > budget) {
    throw Error(
        fmt::format("tiled inference: a memory budget of {} cannot hold even a tile of one output pixel, "
                    "which reads {}x{} input pixels and needs {} ({} of tensors, the parameters {} of them, "
                    "and {} of convolution staging buffers)",
                    mib(budget), largest_input(input, rows, cols, 1)[2], largest_input(input, rows, cols, 1)[3],
                    mib(smallest.total()), mib(smallest.tensors), mib(model.parameter_bytes()), mib(smallest.staging)));
  }
  std::int64_t fits = 1, too_big = std::max(rows.extent, cols.extent) + 1;
  while (too_big - fits > 1) {
    const std::int64_t middle = fits + (too_big - fits) / 2;
    (need(middle).total() <= budget ? fits : too_big) = middle;
  }
  return fits;
}

}  // namespace

std::string Halo::describe() const {
  return fmt::format("{} above, {} below, {} left, {} right", top, bottom, left, right);
}

double TilePlan::read_ratio() const {
  double read = 0;
  for (const Tile& tile : tiles) read += static_cast<double>(tile.input.pixels());
  return read / static_cast<double>(input[2] * input[3]);
}

void TilePlan::check_input(const Tensor& tensor, const char* who) const {
  DDL_CHECK(tensor.defined() && tensor.dtype() == DType::Float32, "{}: expected a float32 input of shape {}", who,
            input);
  DDL_CHECK(tensor.shape() == input, "{}: the input has shape {}, but the plan was made for {}", who, tensor.shape(),
            input);
}

std::string TilePlan::describe() const {
  std::int64_t tallest = 0, widest = 0;
  for (const Tile& tile : tiles) {
    tallest = std::max(tallest, tile.output.rows.size());
    widest = std::max(widest, tile.output.cols.size());
  }
  const char* staging = device == DeviceType::CPU ? " plus convolution staging buffers of " : "";
  const auto memory = [&](const TileMemory& m) {
    return device == DeviceType::CPU ? fmt::format("{}{}{}", mib(m.tensors), staging, mib(m.staging)) : mib(m.tensors);
  };
  return fmt::format(
      "{}x{} tiles of up to {}x{} output pixels (input {} -> output {}); each reads a halo of {} "
      "(receptive field {}); the tiles read {:.3f}x the input's pixels; estimated memory per device: "
      "{} for the largest tile, {} for the whole image",
      grid_rows, grid_cols, tallest, widest, input, output, halo.describe(), field.describe(), read_ratio(),
      memory(largest_tile), memory(whole_image));
}

TilePlan plan_tiles(const layers::Module& model, const Shape& input, const TilingOptions& options, DeviceType device) {
  for (const auto& [value, name] : {std::pair{options.grid_rows, "grid_rows"},
                                    {options.grid_cols, "grid_cols"},
                                    {options.tile_rows, "tile_rows"},
                                    {options.tile_cols, "tile_cols"},
                                    {options.window_rows, "window_rows"},
                                    {options.window_cols, "window_cols"}}) {
    check_not_negative(value, name);
  }
  if (options.halo < -1)
    throw Error(fmt::format("tiled inference: halo must be -1 (automatic) or at least 0, got {}", options.halo));
  const Mode mode = mode_of(options);
  const SpatialModel spatial(model);

  TilePlan plan;
  plan.input = input;
  plan.output = spatial.output_shape(input);
  plan.field = spatial.receptive_field();
  plan.needed = needed_halo(plan.field);
  plan.device = device;
  const Halo& need = plan.needed;
  if (options.halo >= 0 && options.halo < std::max({need.top, need.bottom, need.left, need.right})) {
    throw Error(
        fmt::format("tiled inference: a halo of {} pixels is too small for this model, whose receptive field is "
                    "{}: exact tiles need {}",
                    options.halo, plan.field.describe(), need.describe()));
  }
  plan.halo = options.halo < 0 ? need : Halo{options.halo, options.halo, options.halo, options.halo};

  const AxisCut rows{"rows", plan.output[2], plan.field.rows, plan.halo.top, plan.halo.bottom, input[2]};
  const AxisCut cols{"columns", plan.output[3], plan.field.cols, plan.halo.left, plan.halo.right, input[3]};
  std::vector<PixelRange> row_ranges{{0, rows.extent}}, col_ranges{{0, cols.extent}};
  switch (mode) {
    case Mode::Whole:
      break;
    case Mode::Grid:
      row_ranges = grid_axis(rows, options.grid_rows, input, plan.output);
      col_ranges = grid_axis(cols, options.grid_cols, input, plan.output);
      break;
    case Mode::TileSize:
      if (options.tile_rows > 0) row_ranges = cut(rows.extent, options.tile_rows);
      if (options.tile_cols > 0) col_ranges = cut(cols.extent, options.tile_cols);
      break;
    case Mode::Window:
      row_ranges = window_axis(rows, options.window_rows);
      col_ranges = window_axis(cols, options.window_cols);
      break;
    case Mode::Budget: {
      const std::int64_t side = side_for_budget(spatial, input, rows, cols, options.memory_budget, device);
      row_ranges = split(rows.extent, ceil_div(rows.extent, side));
      col_ranges = split(cols.extent, ceil_div(cols.extent, side));
      break;
    }
  }
  plan.grid_rows = static_cast<std::int64_t>(row_ranges.size());
  plan.grid_cols = static_cast<std::int64_t>(col_ranges.size());

  // Tiles come in a few shapes; the largest estimate of each part over them
  // (pooling's floors make a larger tile not always the hungrier).
  std::map<std::pair<std::int64_t, std::int64_t>, TileMemory> memory_of_shape;
  for (std::size_t i = 0; i < row_ranges.size(); ++i) {
    for (std::size_t j = 0; j < col_ranges.size(); ++j) {
      const AxisTile r = axis_tile(row_ranges[i], rows);
      const AxisTile c = axis_tile(col_ranges[j], cols);
      Tile tile{static_cast<std::int64_t>(i),
                static_cast<std::int64_t>(j),
                {row_ranges[i], col_ranges[j]},
                {r.input, c.input},
                {r.keep, c.keep}};
      // The model must run on the tile, and compute at least what it keeps.
      const Shape tile_input{input[0], input[1], tile.input.rows.size(), tile.input.cols.size()};
      const Shape tile_output = spatial.output_shape(tile_input);
      DDL_CHECK(tile_output[2] >= tile.keep.rows.end && tile_output[3] >= tile.keep.cols.end,
                "tiled inference: tile ({}, {}) reading {} computes {}, short of the {}x{} it keeps (a bug in the "
                "plan for receptive field {})",
                i, j, tile_input, tile_output, tile.keep.rows.end, tile.keep.cols.end, plan.field.describe());
      const auto [entry, is_new] = memory_of_shape.try_emplace({tile_input[2], tile_input[3]});
      if (is_new) {
        entry->second = spatial.memory(tile_input, device);
        plan.largest_tile.tensors = std::max(plan.largest_tile.tensors, entry->second.tensors);
        plan.largest_tile.staging = std::max(plan.largest_tile.staging, entry->second.staging);
      }
      plan.tiles.push_back(tile);
    }
  }
  plan.whole_image = spatial.memory(input, device);
  return plan;
}

}  // namespace ddl::parallel
