// Domain decomposition for inference: the output of a fully-convolutional
// model is cut into a grid of tiles, and each tile reads its share of the
// input plus a halo as wide as the receptive field needs, so that the tiles'
// outputs stitched together equal the whole image's output exactly, while a
// device holds only one tile's activations at a time.
//
// Why it is exact: a tile owning output rows [a, b) reads the input rows
// from floor(a S) - before, rounded down to the receptive field's alignment,
// to ceil(b S) + bottom (S: input pixels per output pixel), clipped to the
// image. At the image's true border the tile's edge is the image's edge, so
// every layer pads there exactly as on the whole image. Inside the image a
// layer pads the tile's edge with zeros where the whole image has pixels,
// but the halo is wide enough that no owned output depends on those: every
// owned output's receptive field lies inside what the tile read. The tile's
// first input row is a multiple of the alignment, so each strided layer's
// windows fall on the same pixels as on the whole image, and each upsampled
// pixel repeats the same one.
//
// Sliding-window inference (MONAI's sliding_window_inference, GIS tilers)
// instead overlaps windows by a fraction and blends their outputs, which
// approximates the whole-image result near window edges; here each output
// pixel comes from exactly one tile and equals the whole image's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/core/shape.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/parallel/planning/receptive_field.hpp>

namespace ddl::parallel {

// Pixels [begin, end) along one axis.
struct PixelRange {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const PixelRange&) const = default;
};

struct Region {
  PixelRange rows, cols;
  std::int64_t pixels() const { return rows.size() * cols.size(); }
  bool operator==(const Region&) const = default;
};

// The input pixels a tile reads beyond its own on each side.
struct Halo {
  std::int64_t top = 0, bottom = 0, left = 0, right = 0;
  // "15 above, 15 below, 15 left, 15 right"
  std::string describe() const;
  bool operator==(const Halo&) const = default;
};

struct Tile {
  std::int64_t grid_row = 0, grid_col = 0;
  Region output;  // the output pixels it owns
  Region input;   // the input pixels it reads: its own and the halo, inside the image
  Region keep;    // where `output` lies in the output computed from `input`
};

// How to cut the output; at most one of the grid, the tile size, the window
// and the memory budget. None: one tile, the whole image.
struct TilingOptions {
  // A grid of rows x columns of near-equal tiles (where the output's extent
  // does not divide, the first tiles are one pixel larger).
  std::int64_t grid_rows = 0, grid_cols = 0;
  // Tiles of this many output pixels, the last row and column smaller (a GIS
  // tiler's tile size).
  std::int64_t tile_rows = 0, tile_cols = 0;
  // Tiles that read at most this many input pixels, halo included (MONAI's
  // roi_size); each owns what remains once the halo is taken off.
  std::int64_t window_rows = 0, window_cols = 0;
  // The largest square tiles whose estimated forward pass fits this many
  // bytes on a device, parameters included (SpatialModel::memory, staging
  // buffers included on the CPU).
  std::size_t memory_budget = 0;
  // Input pixels read beyond each tile on every side; -1: what the model
  // needs. A halo narrower than that is refused; a wider one is allowed
  // (it only recomputes more). A tile's first row and column are then
  // rounded down to the receptive field's alignment, so that its windows
  // line up with the whole image's.
  std::int64_t halo = -1;
};

struct TilePlan {
  Shape input, output;  // the whole image's, [N, C, H, W] and [N, K, OH, OW]
  ReceptiveField field;
  Halo needed;  // the narrowest halo that is exact
  Halo halo;    // what the tiles read, before rounding each start down to the alignment
  std::int64_t grid_rows = 1, grid_cols = 1;
  std::vector<Tile> tiles;  // row by row
  TileMemory largest_tile;  // the most any tile needs (each part's maximum over the tiles)
  TileMemory whole_image;   // the same for the whole image in one piece
  DeviceType device = DeviceType::CPU;

  // The input pixels all tiles read over the image's: 1 without overlap,
  // above 1 by the halos' recomputation.
  double read_ratio() const;
  // Throws ddl::Error unless `input` is a float32 tensor of the plan's input
  // shape; `who` names the caller.
  void check_input(const Tensor& input, const char* who) const;
  // What the plan is, in one paragraph: grid, tile sizes, halo, receptive
  // field, the recomputation and the memory estimates.
  std::string describe() const;
};

// Plans the tiles of an input of shape `input` ([N, C, H, W]) for `model`,
// whose memory is estimated for a device of type `device`. Everything is
// checked before any work: throws ddl::Error naming the layer that is not
// fully convolutional, options that conflict, a grid finer than the output
// (with the largest that works), a halo too narrow (with the halo needed on
// each side), a window too small to own an output pixel (with the smallest
// window), a budget too small for the smallest tile (with what that tile
// needs).
TilePlan plan_tiles(const layers::Module& model, const Shape& input, const TilingOptions& options,
                    DeviceType device = DeviceType::CPU);

}  // namespace ddl::parallel
