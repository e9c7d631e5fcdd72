// Tiled inference in one process: the tiles of a TilePlan (tile_plan.hpp) run
// on one or more devices (logical CPU devices, CUDA devices), each device
// holding the model and one tile's activations at a time, and their owned
// outputs are stitched into the whole image's output in host memory. Over
// MPI ranks, see distributed_tiles.hpp.
//
//   auto plan = parallel::plan_tiles(*model, image.shape(), {.grid_rows = 2, .grid_cols = 2});
//   Tensor mask_logits = parallel::tiled_forward(*model, image, plan, {cuda(0), cuda(1)});
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include <ddl/core/autograd.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/parallel/planning/tile_plan.hpp>

namespace ddl::parallel {

// Called after each tile with the number of tiles done and the total.
using TileProgress = std::function<void(const Tile& tile, std::size_t done, std::size_t total)>;

// Runs `model` over `input` (the plan's input shape, float32, in host memory
// or on a CUDA device) tile by tile, tile i on devices[i % devices.size()],
// in evaluation mode without gradients, and returns the stitched output
// [N, K, OH, OW] in host memory (the input's CPU device, else cpu:0). The
// devices take their tiles one after another, the model moving to each in
// turn; it is moved back and its training mode restored at the end. Equals
// model(input) (bitwise on the CPU; see docs/PERFORMANCE.md for which
// kernels allow it). Throws ddl::Error, before running any tile, for an
// input of another shape than the plan's, no devices, or a device that
// does not exist.
Tensor tiled_forward(layers::Module& model, const Tensor& input, const TilePlan& plan,
                     const std::vector<Device>& devices, const TileProgress& progress = {});

// The building blocks, for running chosen tiles (e.g. a rank writing its own
// part of the output to disk, or distributed_tiles.hpp):

// Moves `model` to `device` and runs it in evaluation mode without gradients
// for as long as the scope lives; then moves it back to the device its
// parameters were on and restores its training mode.
class InferenceScope {
 public:
  InferenceScope(layers::Module& model, const Device& device);
  ~InferenceScope();
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

  void move_to(const Device& device);

 private:
  layers::Module& model_;
  std::optional<Device> home_;  // none for a model without parameters or buffers
  layers::EvalModeGuard eval_mode_;
  NoGradGuard no_grad_;
};

// The pixels `region` of every plane of an NCHW float32 tensor in host
// memory, as a new tensor on the same device.
Tensor crop(const Tensor& input, const Region& region);
// The output pixels `tile` owns, [N, K, rows, cols] in host memory, from the
// tile's input region `tile_input` (crop(image, tile.input)): runs the model
// on `device`, where an InferenceScope has put it.
Tensor run_tile(layers::Module& model, const Tensor& tile_input, const Tile& tile, const Device& device);
// Writes a tile's owned output (from run_tile) into the whole output.
void paste_tile(Tensor& output, const Tile& tile, const Tensor& owned);

}  // namespace ddl::parallel
