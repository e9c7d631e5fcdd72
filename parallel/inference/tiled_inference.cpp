// Running a TilePlan on devices in one process (see tiled_inference.hpp).
#include <ddl/parallel/inference/tiled_inference.hpp>

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/error.hpp>

namespace ddl::parallel {
namespace {

// Copies the pixels `from` of every plane of the NCHW host tensor `source`
// to the same-sized region of `target` whose top-left corner is (row, col).
void copy_region(const Tensor& source, const Region& from, Tensor& target, std::int64_t row, std::int64_t col) {
  const std::int64_t planes = source.size(0) * source.size(1);
  const std::int64_t source_rows = source.size(2), source_cols = source.size(3);
  const std::int64_t target_rows = target.size(2), target_cols = target.size(3);
  const float* in = source.data<float>();
  float* out = target.data<float>();
  const auto row_bytes = static_cast<std::size_t>(from.cols.size()) * sizeof(float);
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    for (std::int64_t r = 0; r < from.rows.size(); ++r) {
      const float* line = in + (plane * source_rows + from.rows.begin + r) * source_cols + from.cols.begin;
      std::memcpy(out + (plane * target_rows + row + r) * target_cols + col, line, row_bytes);
    }
  }
}

void check_run(const Tensor& input, const TilePlan& plan, const std::vector<Device>& devices) {
  plan.check_input(input, "tiled_forward");
  DDL_CHECK(!devices.empty(), "tiled_forward: no devices to run the {} tiles on", plan.tiles.size());
  for (const Device& device : devices) check_device_exists(device);
}

}  // namespace

InferenceScope::InferenceScope(layers::Module& model, const Device& device) : model_(model), eval_mode_(model) {
  const auto state = model.state_dict();
  if (!state.empty()) home_ = state.front().second.device();
  move_to(device);
}

InferenceScope::~InferenceScope() {
  if (!home_) return;
  try {
    model_.to(*home_);
  } catch (const std::exception&) {
    // Leaving the model where it is beats ending the program in a
    // destructor; the error that unwound the scope is the one to report.
  }
}

void InferenceScope::move_to(const Device& device) { model_.to(device); }

Tensor crop(const Tensor& input, const Region& region) {
  DDL_CHECK(input.device().is_cpu() && input.dim() == 4 && input.dtype() == DType::Float32,
            "crop: expected a float32 NCHW tensor in host memory, got {} {} on {}", dtype_name(input.dtype()),
            input.shape(), input.device().str());
  DDL_CHECK(region.rows.begin >= 0 && region.cols.begin >= 0 && region.rows.end <= input.size(2) &&
                region.cols.end <= input.size(3) && region.pixels() > 0,
            "crop: rows [{}, {}) x columns [{}, {}) do not lie inside {}", region.rows.begin, region.rows.end,
            region.cols.begin, region.cols.end, input.shape());
  Tensor part = Tensor::empty({input.size(0), input.size(1), region.rows.size(), region.cols.size()},
                              {DType::Float32, input.device(), false});
  copy_region(input, region, part, 0, 0);
  return part;
}

Tensor run_tile(layers::Module& model, const Tensor& tile_input, const Tile& tile, const Device& device) {
  return crop(model.forward(tile_input.to(device)).to(tile_input.device()), tile.keep);
}

void paste_tile(Tensor& output, const Tile& tile, const Tensor& owned) {
  DDL_CHECK(owned.shape() == Shape({output.size(0), output.size(1), tile.output.rows.size(), tile.output.cols.size()}),
            "paste_tile: tile ({}, {}) owns {}x{} pixels of output {}, but its output has shape {}", tile.grid_row,
            tile.grid_col, tile.output.rows.size(), tile.output.cols.size(), output.shape(), owned.shape());
  copy_region(owned, {{0, owned.size(2)}, {0, owned.size(3)}}, output, tile.output.rows.begin, tile.output.cols.begin);
}

Tensor tiled_forward(layers::Module& model, const Tensor& input, const TilePlan& plan,
                     const std::vector<Device>& devices, const TileProgress& progress) {
  check_run(input, plan, devices);
  const Tensor host = input.device().is_cpu() ? input : input.to(cpu());
  Tensor output = Tensor::empty(plan.output, {DType::Float32, host.device(), false});
  InferenceScope scope(model, devices.front());
  std::size_t done = 0;
  // Device by device, so that each receives the model once.
  for (std::size_t d = 0; d < devices.size() && d < plan.tiles.size(); ++d) {
    scope.move_to(devices[d]);
    for (std::size_t i = d; i < plan.tiles.size(); i += devices.size()) {
      const Tile& tile = plan.tiles[i];
      paste_tile(output, tile, run_tile(model, crop(host, tile.input), tile, devices[d]));
      if (progress) progress(tile, ++done, plan.tiles.size());
    }
  }
  return output;
}

}  // namespace ddl::parallel
