// Synthetic segmentation data for the fully-convolutional example:
// grayscale images of filled discs, rectangles and triangles on a smoothly
// varying, noisy background, with the class of every pixel as the target.
// One large image with many shapes is the input tiled inference splits into
// tiles.
#pragma once

#include <cstdint>

#include <ddl/models/data/dataset.hpp>

namespace ddl::models {

// The classes of a pixel: background 0, then one per kind of shape.
inline constexpr std::int64_t kShapesBackground = 0;
inline constexpr std::int64_t kShapesDisc = 1;
inline constexpr std::int64_t kShapesRectangle = 2;
inline constexpr std::int64_t kShapesTriangle = 3;
inline constexpr std::int64_t kShapesClasses = 4;

struct ShapesOptions {
  std::int64_t samples = 1000;  // images, >= 1
  std::int64_t height = 64;     // pixels, >= 1
  std::int64_t width = 64;      // pixels, >= 1
  // Shapes drawn on each image, >= 0; later ones cover earlier ones.
  std::int64_t shapes_per_image = 3;
  // A shape's size in pixels (a disc's radius, a rectangle's half side, the
  // distance of a triangle's corners from its centre), drawn uniformly from
  // [min_size, max_size]; 1 <= min_size <= max_size. In pixels, not as a
  // fraction of the image, so a network trained on small images meets shapes
  // of the same size in a large one.
  float min_size = 5.0f;
  float max_size = 11.0f;
  // Standard deviation of the Gaussian noise added to every pixel, >= 0
  // (shapes stand 0.5 to 1 above the background, which varies by about 0.6).
  float noise = 0.2f;
  std::uint64_t seed = 0;
};

// N = options.samples images of H x W pixels:
//   inputs  float32 [N, 1, H, W]: background + shapes + noise. The
//           background is a random linear ramp plus a random plane wave of a
//           period of 20 to 60 pixels; each shape is filled with the
//           background raised by a random contrast in [0.5, 1], so no
//           intensity tells the classes apart, only their outlines do.
//   targets int64 [N, H, W]: each pixel's class (kShapes*), the shape
//           drawn last where shapes overlap.
// A shape's centre is uniform over the image (it may be cut by the border),
// its kind uniform over the three, a rectangle's sides and a triangle's
// rotation random; triangles are equilateral. Image i draws from
// Philox4x32(counter = i·2^40 + block, key = seed) only, so an image is the
// same for any thread count and any N covering i. 2000 images of 64x64 took
// 0.43 s on one core here (0.17 s of it without noise: the Box–Muller
// logarithms and sines), with the other core busy. Throws ddl::Error naming
// any invalid option.
Dataset make_shapes(const ShapesOptions& options = {});

}  // namespace ddl::models
