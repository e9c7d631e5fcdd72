// Tiled inference over MPI ranks: the tiles of a TilePlan (tile_plan.hpp)
// are dealt round robin to the ranks, each running its own on its own
// device; the root sends each tile's input region to its rank and stitches
// the owned outputs that come back. Only the root holds the whole image and
// the whole output; every other rank holds the model and one tile at a time.
//
//   const auto plan = parallel::plan_tiles(comm, *model, image_shape, {.grid_rows = 4, .grid_cols = 4});
//   Tensor output = parallel::tiled_forward(comm, *model, image, plan, device);  // defined on rank 0
//
// A rank that should write its own part of the output instead runs the tiles
// tiles_of_rank() gives it with run_tile() (tiled_inference.hpp), reading its
// input regions itself.
#pragma once

#include <cstddef>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/planning/tile_plan.hpp>
#include <ddl/parallel/inference/tiled_inference.hpp>

namespace ddl::parallel {

// plan_tiles on every rank, agreed: a plan that fails on any rank throws
// ddl::Error on every rank with the same message (each failing rank's reason,
// named by rank), and ranks whose plans differ (other options, another
// model or input shape) throw, with each rank's plan, before any tile runs.
// Collective.
TilePlan plan_tiles(const Communicator& comm, const layers::Module& model, const Shape& input,
                    const TilingOptions& options, DeviceType device = DeviceType::CPU);

// The tiles rank `rank` of `ranks` runs: rank, rank + ranks, ... Dealing
// round robin keeps ranks evenly loaded, since neighbouring tiles are alike.
std::vector<std::size_t> tiles_of_rank(const TilePlan& plan, int rank, int ranks);

// Runs this rank's tiles of `plan` on `device` (collective). `input` is read
// on `root` only (the other ranks may pass an undefined tensor): root sends
// each tile its input region, at most two rounds of tiles ahead, and
// stitches the owned outputs. Returns the output [N, K, OH, OW] in host
// memory on root, an undefined tensor elsewhere. `progress` is called on
// root as each tile is stitched. The model is moved to `device`, run in
// evaluation mode without gradients, and moved back. A rank whose tile
// fails (out of memory, say) aborts the job with its reason, so no rank
// waits forever for its tiles.
Tensor tiled_forward(const Communicator& comm, layers::Module& model, const Tensor& input, const TilePlan& plan,
                     const Device& device, int root = 0, const TileProgress& progress = {});

}  // namespace ddl::parallel
