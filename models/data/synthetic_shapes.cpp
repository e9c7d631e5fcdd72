// The shapes generator: each image is an independent, counter-based draw, so
// images are filled in parallel with no shared state. A shape is painted over
// its bounding box only, which keeps a large image with many shapes cheap.
#include <ddl/models/data/synthetic_shapes.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <ddl/core/check.hpp>
#include <ddl/core/random.hpp>

namespace ddl::models {
namespace {

constexpr float kTwoPi = 6.28318530717958647692f;

// Image i owns the Philox counters [i·2^40, (i+1)·2^40): blocks 0 and 1 draw
// the background, 2 + 2s and 3 + 2s shape s, and the pixel noise starts at
// kNoiseBlock (four normals per block), so neither depends on the other's count.
constexpr int kImageCounterBits = 40;
constexpr std::uint64_t kNoiseBlock = std::uint64_t{1} << 39;
constexpr std::int64_t kMaxShapesPerImage = std::int64_t{1} << 20;

float pixel_centre(std::int64_t i) { return static_cast<float>(i) + 0.5f; }

// A uniform float in [low, high) from 32 random bits.
float uniform(float low, float high, std::uint32_t bits) {
  return low + (high - low) * (1.0f - uint_to_unit_float(bits));
}

// A ramp plus a plane wave, in pixel coordinates.
struct Background {
  float offset, slope_x, slope_y, wave_x, wave_y, phase, amplitude;

  Background(const Philox4x32& first, const Philox4x32& second, std::int64_t height, std::int64_t width)
      : offset(uniform(-0.2f, 0.2f, first.out[0])),
        slope_x(uniform(-0.3f, 0.3f, first.out[1]) / static_cast<float>(width)),
        slope_y(uniform(-0.3f, 0.3f, first.out[2]) / static_cast<float>(height)),
        phase(uniform(0.0f, kTwoPi, second.out[0])),
        amplitude(uniform(0.05f, 0.15f, second.out[1])) {
    const float angle = uniform(0.0f, kTwoPi, first.out[3]);
    const float frequency = kTwoPi / uniform(20.0f, 60.0f, second.out[2]);
    wave_x = frequency * std::cos(angle);
    wave_y = frequency * std::sin(angle);
    offset -= 0.5f * (slope_x * static_cast<float>(width) + slope_y * static_cast<float>(height));
  }

  // Fills `pixels` (height x width). The wave is separable, sin(a + b) =
  // sin a cos b + cos a sin b, so a pixel costs two products, not a sine.
  void fill(float* pixels, std::int64_t height, std::int64_t width) const {
    std::vector<float> sin_x(static_cast<std::size_t>(width)), cos_x(static_cast<std::size_t>(width));
    for (std::int64_t x = 0; x < width; ++x) {
      const float a = wave_x * pixel_centre(x) + phase;
      sin_x[static_cast<std::size_t>(x)] = amplitude * std::sin(a);
      cos_x[static_cast<std::size_t>(x)] = amplitude * std::cos(a);
    }
    for (std::int64_t y = 0; y < height; ++y) {
      const float b = wave_y * pixel_centre(y), sin_b = std::sin(b), cos_b = std::cos(b);
      const float row = offset + slope_y * pixel_centre(y);
      for (std::int64_t x = 0; x < width; ++x) {
        const auto i = static_cast<std::size_t>(x);
        pixels[y * width + x] = row + slope_x * pixel_centre(x) + sin_x[i] * cos_b + cos_x[i] * sin_b;
      }
    }
  }
};

// One shape: its class, centre, size and how to test a pixel centre.
struct Figure {
  std::int64_t kind;
  float cx, cy, half_x, half_y, contrast;
  float corners[3][2];  // a triangle's, counter-clockwise

  Figure(const Philox4x32& first, const Philox4x32& second, const ShapesOptions& o)
      : kind(kShapesDisc + static_cast<std::int64_t>(first.out[0] % 3)),
        cx(uniform(0.0f, static_cast<float>(o.width), first.out[1])),
        cy(uniform(0.0f, static_cast<float>(o.height), first.out[2])),
        half_x(uniform(o.min_size, o.max_size, first.out[3])),
        half_y(kind == kShapesRectangle ? uniform(o.min_size, o.max_size, second.out[0]) : half_x),
        contrast(uniform(0.5f, 1.0f, second.out[1])),
        corners{} {
    const float rotation = uniform(0.0f, kTwoPi, second.out[2]);
    for (int k = 0; k < 3; ++k) {
      corners[k][0] = cx + half_x * std::cos(rotation + kTwoPi * static_cast<float>(k) / 3.0f);
      corners[k][1] = cy + half_x * std::sin(rotation + kTwoPi * static_cast<float>(k) / 3.0f);
    }
  }

  bool contains(float x, float y) const {
    const float dx = x - cx, dy = y - cy;
    switch (kind) {
      case kShapesDisc:
        return dx * dx + dy * dy <= half_x * half_x;
      case kShapesRectangle:
        return std::abs(dx) <= half_x && std::abs(dy) <= half_y;
      default:
        break;
    }
    // Inside a counter-clockwise triangle: left of (or on) every edge.
    for (int k = 0; k < 3; ++k) {
      const float* a = corners[k];
      const float* b = corners[(k + 1) % 3];
      if ((b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0]) < 0.0f) return false;
    }
    return true;
  }
};

struct ImageGenerator {
  float* inputs;
  std::int64_t* targets;
  const ShapesOptions& options;

  void operator()(std::int64_t image) const {
    const std::int64_t height = options.height, width = options.width, pixels = height * width;
    const std::uint64_t base = static_cast<std::uint64_t>(image) << kImageCounterBits;
    const std::uint64_t seed = options.seed;
    float* pixel = inputs + image * pixels;
    std::int64_t* label = targets + image * pixels;
    Background(Philox4x32(base, seed), Philox4x32(base + 1, seed), height, width).fill(pixel, height, width);
    std::fill(label, label + pixels, kShapesBackground);

    // Each shape sets its pixels' contrast; a later one replaces an earlier one's.
    std::vector<float> contrast(static_cast<std::size_t>(pixels), 0.0f);
    for (std::int64_t s = 0; s < options.shapes_per_image; ++s) {
      const auto block = base + 2 + 2 * static_cast<std::uint64_t>(s);
      const Figure shape(Philox4x32(block, seed), Philox4x32(block + 1, seed), options);
      // The pixels whose centres may lie inside: a box of the largest half side.
      const float reach = std::max(shape.half_x, shape.half_y);
      const auto first = [](float low) {
        return std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(low)));
      };
      const auto last = [](float high, std::int64_t size) {
        return std::min<std::int64_t>(size, static_cast<std::int64_t>(std::ceil(high)) + 1);
      };
      for (std::int64_t y = first(shape.cy - reach); y < last(shape.cy + reach, height); ++y) {
        for (std::int64_t x = first(shape.cx - reach); x < last(shape.cx + reach, width); ++x) {
          if (!shape.contains(pixel_centre(x), pixel_centre(y))) continue;
          contrast[static_cast<std::size_t>(y * width + x)] = shape.contrast;
          label[y * width + x] = shape.kind;
        }
      }
    }
    for (std::int64_t p = 0; p < pixels; ++p) pixel[p] += contrast[static_cast<std::size_t>(p)];

    if (options.noise == 0.0f) return;
    // Box–Muller, both outputs of each pair: one block is 4 pixels' noise.
    for (std::int64_t p = 0; p < pixels; p += 4) {
      const Philox4x32 bits(base + kNoiseBlock + static_cast<std::uint64_t>(p / 4), seed);
      for (int pair = 0; pair < 2; ++pair) {
        const float radius = options.noise * std::sqrt(-2.0f * std::log(uint_to_unit_float(bits.out[2 * pair])));
        const float angle = kTwoPi * uint_to_unit_float(bits.out[2 * pair + 1]);
        const std::int64_t at = p + 2 * pair;
        if (at < pixels) pixel[at] += radius * std::cos(angle);
        if (at + 1 < pixels) pixel[at + 1] += radius * std::sin(angle);
      }
    }
  }
};

}  // namespace

Dataset make_shapes(const ShapesOptions& options) {
  constexpr std::int64_t kMaxSide = std::int64_t{1} << 16;
  DDL_CHECK(options.samples >= 1 && options.samples < (std::int64_t{1} << (64 - kImageCounterBits)),
            "make_shapes: samples must be in [1, 2^24), got {}", options.samples);
  DDL_CHECK(options.height >= 1 && options.height <= kMaxSide && options.width >= 1 && options.width <= kMaxSide,
            "make_shapes: height and width must be in [1, {}], got {} x {}", kMaxSide, options.height, options.width);
  DDL_CHECK(options.shapes_per_image >= 0 && options.shapes_per_image <= kMaxShapesPerImage,
            "make_shapes: shapes_per_image must be in [0, {}], got {}", kMaxShapesPerImage, options.shapes_per_image);
  DDL_CHECK(std::isfinite(options.min_size) && std::isfinite(options.max_size) && options.min_size >= 1.0f &&
                options.min_size <= options.max_size,
            "make_shapes: shape sizes need 1 <= min_size <= max_size (finite), got min_size {} and max_size {}",
            options.min_size, options.max_size);
  DDL_CHECK(std::isfinite(options.noise) && options.noise >= 0.0f, "make_shapes: noise must be finite and >= 0, got {}",
            options.noise);
  const std::int64_t n = options.samples, h = options.height, w = options.width;
  Dataset data{Tensor::empty(Shape{n, 1, h, w}), Tensor::empty(Shape{n, h, w}, {.dtype = DType::Int64})};
  const ImageGenerator generate{data.inputs.data<float>(), data.targets.data<std::int64_t>(), options};
#pragma omp parallel for schedule(static) if (n >= 8)
  for (std::int64_t i = 0; i < n; ++i) generate(i);
  return data;
}

}  // namespace ddl::models
