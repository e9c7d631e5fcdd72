// The synthetic stress–strain generator (models/data/stress_strain.cpp): shapes,
// seeded determinism, the documented parameter ranges, and the physics of
// the elastic–plastic law it samples.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/models/data/stress_strain.hpp>

using namespace ddl;
using namespace ddl::models;

namespace {

Dataset curves(std::int64_t samples, std::uint64_t seed, float noise = 0.0f) {
  StressStrainOptions options;
  options.samples = samples;
  options.seed = seed;
  options.stress_noise_mpa = noise;
  return make_stress_strain(options);
}

}  // namespace

TEST_CASE("make_stress_strain gives inputs N x 200 x 3 and targets N x 2, float32") {
  const Dataset data = curves(37, 1);
  CHECK(data.size() == 37);
  CHECK(data.inputs.shape() == Shape{37, 200, 3});
  CHECK(data.targets.shape() == Shape{37, 2});
  CHECK(data.inputs.dtype() == DType::Float32);
  CHECK(data.targets.dtype() == DType::Float32);
  CHECK(curves(0, 1).inputs.shape() == Shape{0, 200, 3});
}

TEST_CASE("make_stress_strain is deterministic for a seed, whatever the sample count") {
  const Dataset a = curves(1000, 42, 5.0f);
  const Dataset b = curves(1000, 42, 5.0f);
  CHECK(a.inputs.to_vector<float>() == b.inputs.to_vector<float>());
  CHECK(a.targets.to_vector<float>() == b.targets.to_vector<float>());
  // Sample i depends on (seed, i) only: the first 10 of 1000 (generated in
  // parallel) equal 10 generated alone (serially).
  const Dataset few = curves(10, 42, 5.0f);
  const auto all = a.inputs.to_vector<float>();
  CHECK(few.inputs.to_vector<float>() == std::vector<float>(all.begin(), all.begin() + 10 * 600));
}

TEST_CASE("make_stress_strain with different seeds gives different curves") {
  CHECK(curves(20, 1).targets.to_vector<float>() != curves(20, 2).targets.to_vector<float>());
  CHECK(curves(20, 1, 1.0f).inputs.to_vector<float>() != curves(20, 2, 1.0f).inputs.to_vector<float>());
}

TEST_CASE("make_stress_strain targets lie in the documented ranges and spread over them") {
  const auto targets = curves(2000, 7).targets.to_vector<float>();
  float e_low = 1e9f, e_high = 0.0f, s_low = 1e9f, s_high = 0.0f;
  for (std::size_t i = 0; i < targets.size(); i += 2) {
    e_low = std::min(e_low, targets[i]);
    e_high = std::max(e_high, targets[i]);
    s_low = std::min(s_low, targets[i + 1]);
    s_high = std::max(s_high, targets[i + 1]);
  }
  CHECK(e_low >= kYoungsModulusMinGPa);
  CHECK(e_high <= kYoungsModulusMaxGPa);
  CHECK(s_low >= kYieldStressMinMPa);
  CHECK(s_high <= kYieldStressMaxMPa);
  CHECK(e_high - e_low > 0.95f * (kYoungsModulusMaxGPa - kYoungsModulusMinGPa));
  CHECK(s_high - s_low > 0.95f * (kYieldStressMaxMPa - kYieldStressMinMPa));
}

TEST_CASE("noise-free curves follow Hooke's law below yield, harden monotonically, and unload elastically to zero") {
  const Dataset data = curves(200, 3);
  const auto inputs = data.inputs.to_vector<float>();
  const auto targets = data.targets.to_vector<float>();
  for (std::int64_t n = 0; n < data.size(); ++n) {
    const double e = targets[2 * n] * 1000.0;  // MPa
    const double sigma_y = targets[2 * n + 1];
    const float* curve = inputs.data() + n * 600;
    auto strain = [&](std::int64_t k) { return static_cast<double>(curve[3 * k]); };
    auto stress = [&](std::int64_t k) { return static_cast<double>(curve[3 * k + 1]); };
    auto flag = [&](std::int64_t k) { return curve[3 * k + 2]; };
    CHECK(strain(0) == 0.0);
    CHECK(stress(0) == 0.0);
    int elastic_points = 0, plastic_points = 0;
    for (std::int64_t k = 0; k < kStressStrainPoints; ++k) {
      const bool loading = k < kStressStrainLoadingPoints;
      REQUIRE(flag(k) == (loading ? 1.0f : 0.0f));
      if (!loading) continue;
      if (strain(k) * e < sigma_y * (1.0 - 1e-6)) {
        ++elastic_points;
        REQUIRE(stress(k) == doctest::Approx(e * strain(k)).epsilon(1e-5));
      } else {
        ++plastic_points;
        // At or past yield: above sigma_y, and rising with strain.
        REQUIRE(stress(k) >= sigma_y * (1.0 - 1e-5));
        REQUIRE(stress(k) > stress(k - 1));
        // Between two plastic points the slope is the tangent modulus E·H/(E+H).
        if (strain(k - 1) * e > sigma_y * (1.0 + 1e-6)) {
          const double h = StressStrainOptions{}.hardening_ratio * e;
          const double slope = (stress(k) - stress(k - 1)) / (strain(k) - strain(k - 1));
          REQUIRE(slope == doctest::Approx(e * h / (e + h)).epsilon(1e-3));
        }
      }
      if (k > 0) REQUIRE(strain(k) > strain(k - 1));
    }
    CHECK(elastic_points >= 1);
    CHECK(plastic_points >= 1);
    // Unloading: strain falls and stress follows the elastic slope E back to 0.
    const std::int64_t peak = kStressStrainLoadingPoints - 1;
    for (std::int64_t k = peak + 1; k < kStressStrainPoints; ++k) {
      REQUIRE(strain(k) < strain(k - 1));
      REQUIRE(stress(k) == doctest::Approx(stress(peak) - e * (strain(peak) - strain(k))).epsilon(1e-4).scale(sigma_y));
    }
    CHECK(std::abs(stress(kStressStrainPoints - 1)) < 1e-3 * sigma_y);
    CHECK(strain(kStressStrainPoints - 1) > 0.0);  // the plastic strain stays
  }
}

TEST_CASE("stress noise has the requested standard deviation and leaves strain and flags alone") {
  const Dataset clean = curves(500, 9);
  const Dataset noisy = curves(500, 9, 10.0f);
  CHECK(clean.targets.to_vector<float>() == noisy.targets.to_vector<float>());
  const auto a = clean.inputs.to_vector<float>();
  const auto b = noisy.inputs.to_vector<float>();
  double sum = 0.0, sum_sq = 0.0;
  std::int64_t count = 0;
  for (std::size_t i = 0; i < a.size(); i += 3) {
    REQUIRE(a[i] == b[i]);
    REQUIRE(a[i + 2] == b[i + 2]);
    const double d = static_cast<double>(b[i + 1]) - a[i + 1];
    sum += d;
    sum_sq += d * d;
    ++count;
  }
  const double mean = sum / count;
  const double stddev = std::sqrt(sum_sq / count - mean * mean);
  CHECK(std::abs(mean) < 0.1);  // 100,000 draws: standard error 0.03
  CHECK(stddev == doctest::Approx(10.0).epsilon(0.02));
}

TEST_CASE("make_stress_strain rejects a negative sample count or noise") {
  StressStrainOptions options;
  options.samples = -1;
  CHECK_THROWS_AS(make_stress_strain(options), Error);
  options.samples = 1;
  options.stress_noise_mpa = -1.0f;
  CHECK_THROWS_AS(make_stress_strain(options), Error);
}
