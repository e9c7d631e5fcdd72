// The synthetic segmentation data (models/data/synthetic_shapes.cpp): shapes
// and dtypes, seeded determinism, the geometry of each kind of shape, the
// noise's statistics, one large image, and the refused options.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/models/data/synthetic_shapes.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::models;
using ddl::test::throws_error_mentioning;

namespace {

ShapesOptions options_of(std::int64_t samples, std::int64_t height, std::int64_t width, std::uint64_t seed) {
  ShapesOptions options;
  options.samples = samples;
  options.height = height;
  options.width = width;
  options.seed = seed;
  return options;
}

}  // namespace

TEST_CASE("make_shapes gives float32 images [N, 1, H, W] and int64 class maps [N, H, W]") {
  const Dataset data = make_shapes(options_of(7, 13, 29, 1));
  CHECK(data.size() == 7);
  CHECK(data.inputs.shape() == Shape{7, 1, 13, 29});
  CHECK(data.targets.shape() == Shape{7, 13, 29});
  CHECK(data.inputs.dtype() == DType::Float32);
  CHECK(data.targets.dtype() == DType::Int64);
  for (const std::int64_t label : data.targets.to_vector<std::int64_t>()) {
    CHECK((label >= 0 && label < kShapesClasses));
  }
}

TEST_CASE("make_shapes is deterministic for a seed, an image the same whatever the image count") {
  const Dataset a = make_shapes(options_of(11, 17, 23, 5));
  const Dataset b = make_shapes(options_of(11, 17, 23, 5));
  const Dataset fewer = make_shapes(options_of(3, 17, 23, 5));
  const Dataset other = make_shapes(options_of(11, 17, 23, 6));
  CHECK(a.inputs.to_vector<float>() == b.inputs.to_vector<float>());
  CHECK(a.targets.to_vector<std::int64_t>() == b.targets.to_vector<std::int64_t>());
  CHECK(slice(a.inputs, 0, 3).to_vector<float>() == fewer.inputs.to_vector<float>());
  CHECK(slice(a.targets, 0, 3).to_vector<std::int64_t>() == fewer.targets.to_vector<std::int64_t>());
  CHECK(a.inputs.to_vector<float>() != other.inputs.to_vector<float>());
}

TEST_CASE("make_shapes draws discs, squares and equilateral triangles of the given size") {
  // One shape of size r per image; those the border does not cut cover their
  // area up to the pixels along the outline: |pixels - area| <= perimeter.
  constexpr float r = 9.0f;
  ShapesOptions options = options_of(300, 40, 40, 7);
  options.shapes_per_image = 1;
  options.min_size = options.max_size = r;
  const Dataset data = make_shapes(options);
  const auto labels = data.targets.to_vector<std::int64_t>();
  const double pi = std::numbers::pi, root3 = std::sqrt(3.0);
  const std::array<double, kShapesClasses> area{0.0, pi * r * r, 4.0 * r * r, 3.0 * root3 / 4.0 * r * r};
  const std::array<double, kShapesClasses> perimeter{0.0, 2.0 * pi * r, 8.0 * r, 3.0 * root3 * r};
  std::array<int, kShapesClasses> checked{};
  for (std::int64_t i = 0; i < options.samples; ++i) {
    std::int64_t kind = kShapesBackground, pixels = 0;
    bool touches_border = false;
    for (std::int64_t y = 0; y < 40; ++y) {
      for (std::int64_t x = 0; x < 40; ++x) {
        const std::int64_t label = labels[static_cast<std::size_t>((i * 40 + y) * 40 + x)];
        if (label == kShapesBackground) continue;
        CHECK((kind == kShapesBackground || kind == label));  // one shape per image
        kind = label;
        ++pixels;
        touches_border = touches_border || x == 0 || y == 0 || x == 39 || y == 39;
      }
    }
    if (kind == kShapesBackground || touches_border) continue;
    CAPTURE(kind);
    CHECK(std::abs(static_cast<double>(pixels) - area[kind]) <= perimeter[kind]);
    ++checked[kind];
  }
  // About a third of each kind lies whole inside the image.
  for (std::int64_t kind = kShapesDisc; kind < kShapesClasses; ++kind) CHECK(checked[kind] >= 10);
}

TEST_CASE("make_shapes adds Gaussian noise of the given standard deviation, mean 0, to every pixel") {
  ShapesOptions clean = options_of(40, 31, 37, 9);
  clean.noise = 0.0f;
  ShapesOptions noisy = clean;
  noisy.noise = 0.3f;
  const auto a = make_shapes(clean).inputs.to_vector<float>();
  const auto b = make_shapes(noisy).inputs.to_vector<float>();
  double sum = 0.0, squares = 0.0, fourth = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(b[i]) - a[i];
    sum += d;
    squares += d * d;
    fourth += d * d * d * d;
  }
  const auto n = static_cast<double>(a.size());
  const double mean = sum / n, variance = squares / n - mean * mean;
  // n = 45880: the mean's standard error is 0.3 / sqrt(n) = 1.4e-3, the
  // variance's 0.09 * sqrt(2 / n) = 5.9e-4; five of each. A Gaussian's
  // kurtosis is 3 (its estimate's standard error sqrt(24 / n) = 0.023).
  CHECK(std::abs(mean) < 5 * 0.3 / std::sqrt(n));
  CHECK(std::abs(variance - 0.09) < 5 * 0.09 * std::sqrt(2.0 / n));
  CHECK(std::abs(fourth / n / (variance * variance) - 3.0) < 5 * std::sqrt(24.0 / n));
}

TEST_CASE("make_shapes sets each shape above the background it covers, by 0.5 to 1") {
  // Without noise, a pixel a shape covers differs from the same image with
  // no shapes by the shape's contrast; every other pixel not at all.
  ShapesOptions with = options_of(20, 32, 48, 11);
  with.noise = 0.0f;
  ShapesOptions without = with;
  without.shapes_per_image = 0;
  const Dataset shapes = make_shapes(with);
  const auto a = shapes.inputs.to_vector<float>();
  const auto b = make_shapes(without).inputs.to_vector<float>();
  const auto labels = shapes.targets.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double raised = static_cast<double>(a[i]) - b[i];
    if (labels[i] == kShapesBackground) {
      CHECK(raised == 0.0);
    } else {
      CHECK((raised >= 0.5 - 1e-6 && raised <= 1.0 + 1e-6));
    }
  }
}

TEST_CASE("make_shapes generates one large image with many shapes of every kind") {
  ShapesOptions options = options_of(1, 512, 768, 3);
  options.shapes_per_image = 150;
  const Dataset image = make_shapes(options);
  CHECK(image.inputs.shape() == Shape{1, 1, 512, 768});
  std::array<std::int64_t, kShapesClasses> count{};
  for (const std::int64_t label : image.targets.to_vector<std::int64_t>()) ++count[static_cast<std::size_t>(label)];
  // 150 shapes of mean area ~200 px cover about a tenth of 393216 pixels.
  for (std::int64_t kind = kShapesDisc; kind < kShapesClasses; ++kind) CHECK(count[kind] > 4000);
  CHECK(count[kShapesBackground] > 512 * 768 / 2);
}

TEST_CASE("make_shapes refuses options out of range, naming them") {
  const auto refused = [](auto change, std::vector<std::string> parts) {
    ShapesOptions options;
    change(options);
    return throws_error_mentioning([&] { make_shapes(options); }, parts);
  };
  CHECK(refused([](ShapesOptions& o) { o.samples = 0; }, {"make_shapes", "samples", "0"}));
  CHECK(refused([](ShapesOptions& o) { o.height = 0; }, {"make_shapes", "height", "0 x 64"}));
  CHECK(refused([](ShapesOptions& o) { o.width = -3; }, {"make_shapes", "width", "64 x -3"}));
  CHECK(refused([](ShapesOptions& o) { o.shapes_per_image = -1; }, {"make_shapes", "shapes_per_image", "-1"}));
  CHECK(refused([](ShapesOptions& o) { o.min_size = 0.5f; }, {"make_shapes", "min_size 0.5"}));
  CHECK(refused([](ShapesOptions& o) { o.max_size = 4.0f; }, {"make_shapes", "min_size 5", "max_size 4"}));
  CHECK(refused([](ShapesOptions& o) { o.max_size = std::nanf(""); }, {"make_shapes", "max_size nan"}));
  CHECK(refused([](ShapesOptions& o) { o.noise = -0.1f; }, {"make_shapes", "noise", "-0.1"}));
  CHECK(refused([](ShapesOptions& o) { o.noise = INFINITY; }, {"make_shapes", "noise", "inf"}));
}
