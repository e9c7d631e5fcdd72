// Running a TilePlan on devices in one process (see tiled_inference.hpp).
#include <ddl/parallel/tiled_inference.hpp>

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

Tensor crop(const Tensor& source, const Region& region) {
  Tensor part = Tensor::empty({source.size(0), source.size(1), region.rows.size(), region.cols.size()},
                              {DType::Float32, source.device(), false});
  copy_region(source, region, part, 0, 0);
  return part;
}

// Evaluation mode for as long as it lives, then the mode the model had.
class EvaluationScope {
 public:
  explicit EvaluationScope(layers::Module& model) : model_(model), was_training_(model.is_training()) { model.eval(); }
  ~EvaluationScope() { model_.train(was_training_); }
  EvaluationScope(const EvaluationScope&) = delete;
  EvaluationScope& operator=(const EvaluationScope&) = delete;

 private:
  layers::Module& model_;
  bool was_training_;
};

// Puts the model back on the device its parameters and buffers were on
// (nothing to do for a model without any: pooling only).
class DeviceScope {
 public:
  explicit DeviceScope(layers::Module& model) : model_(model) {
    const auto state = model.state_dict();
    if (!state.empty()) home_ = state.front().second.device();
  }
  ~DeviceScope() {
    if (!home_) return;
    try {
      model_.to(*home_);
    } catch (const std::exception&) {
      // Leaving the model where it is beats ending the program in a
      // destructor; the error that unwound us is the one to report.
    }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  layers::Module& model_;
  std::optional<Device> home_;
};

void check_run(const Tensor& input, const TilePlan& plan, const std::vector<Device>& devices) {
  DDL_CHECK(input.defined() && input.dtype() == DType::Float32,
            "tiled_forward: expected a float32 input of shape {}", plan.input);
  DDL_CHECK(input.shape() == plan.input, "tiled_forward: the input has shape {}, but the plan was made for {}",
            input.shape(), plan.input);
  DDL_CHECK(!devices.empty(), "tiled_forward: no devices to run the {} tiles on", plan.tiles.size());
  for (const Device& device : devices) check_device_exists(device);
}

}  // namespace

Tensor run_tile(layers::Module& model, const Tensor& input, const Tile& tile, const Device& device) {
  const Tensor computed = model.forward(crop(input, tile.input).to(device)).to(input.device());
  return crop(computed, tile.keep);
}

void paste_tile(Tensor& output, const Tile& tile, const Tensor& owned) {
  DDL_CHECK(owned.shape() == Shape({output.size(0), output.size(1), tile.output.rows.size(), tile.output.cols.size()}),
            "paste_tile: tile ({}, {}) owns {}x{} pixels of output {}, but its output has shape {}", tile.grid_row,
            tile.grid_col, tile.output.rows.size(), tile.output.cols.size(), output.shape(), owned.shape());
  copy_region(owned, {{0, owned.size(2)}, {0, owned.size(3)}}, output, tile.output.rows.begin,
              tile.output.cols.begin);
}

Tensor tiled_forward(layers::Module& model, const Tensor& input, const TilePlan& plan,
                     const std::vector<Device>& devices, const TileProgress& progress) {
  check_run(input, plan, devices);
  const Tensor host = input.device().is_cpu() ? input : input.to(cpu());
  Tensor output = Tensor::empty(plan.output, {DType::Float32, host.device(), false});
  DeviceScope device_scope(model);
  NoGradGuard no_grad;
  EvaluationScope evaluation(model);
  std::size_t done = 0;
  // Device by device, so that each receives the model once.
  for (std::size_t d = 0; d < devices.size() && d < plan.tiles.size(); ++d) {
    model.to(devices[d]);
    for (std::size_t i = d; i < plan.tiles.size(); i += devices.size()) {
      paste_tile(output, plan.tiles[i], run_tile(model, host, plan.tiles[i], devices[d]));
      if (progress) progress(plan.tiles[i], ++done, plan.tiles.size());
    }
  }
  return output;
}

}  // namespace ddl::parallel
