// The stress–strain generator: one independent, counter-based sample per
// loop iteration, so samples are filled in parallel with no shared state.
#include <ddl/models/data/stress_strain.hpp>

#include <cmath>

#include <ddl/core/check.hpp>
#include <ddl/core/random.hpp>

namespace ddl::models {
namespace {

// Philox blocks per sample: block 0 draws the parameters, blocks 1..50 the
// 200 noise values (four normals per block). A power of two above that, so
// the per-sample counter ranges never overlap.
constexpr std::uint64_t kBlocksPerSample = 128;

float lerp(float low, float high, std::uint32_t bits) {
  // uint_to_unit_float is in (0, 1]; 1 - u is in [0, 1).
  return low + (high - low) * (1.0f - uint_to_unit_float(bits));
}

struct CurveGenerator {
  float* inputs;
  float* targets;
  std::uint64_t seed;
  float noise;
  float hardening_ratio;

  void operator()(std::int64_t sample) const {
    const std::uint64_t base = static_cast<std::uint64_t>(sample) * kBlocksPerSample;
    const Philox4x32 params(base, seed);
    const float youngs_gpa = lerp(kYoungsModulusMinGPa, kYoungsModulusMaxGPa, params.out[0]);
    const float yield_mpa = lerp(kYieldStressMinMPa, kYieldStressMaxMPa, params.out[1]);
    const float peak_strain = lerp(kPeakStrainMin, kPeakStrainMax, params.out[2]);

    const double e = static_cast<double>(youngs_gpa) * 1000.0;  // MPa
    const double sigma_y = yield_mpa;
    const double h = hardening_ratio * e;
    const double tangent = e * h / (e + h);
    const double yield_strain = sigma_y / e;
    auto loading_stress = [&](double strain) {
      return strain <= yield_strain ? e * strain : sigma_y + tangent * (strain - yield_strain);
    };
    const double peak_stress = loading_stress(peak_strain);
    const double residual_strain = peak_strain - peak_stress / e;

    float* curve = inputs + sample * kStressStrainPoints * 3;
    for (std::int64_t k = 0; k < kStressStrainPoints; ++k) {
      double strain = 0.0, stress = 0.0;
      float flag = 1.0f;
      if (k < kStressStrainLoadingPoints) {
        strain = peak_strain * static_cast<double>(k) / static_cast<double>(kStressStrainLoadingPoints - 1);
        stress = loading_stress(strain);
      } else {
        const double t = static_cast<double>(k - kStressStrainLoadingPoints + 1) /
                         static_cast<double>(kStressStrainPoints - kStressStrainLoadingPoints);
        strain = peak_strain - t * (peak_strain - residual_strain);
        stress = peak_stress - e * (peak_strain - strain);
        flag = 0.0f;
      }
      curve[3 * k + 0] = static_cast<float>(strain);
      curve[3 * k + 1] = static_cast<float>(stress);
      curve[3 * k + 2] = flag;
    }
    if (noise > 0.0f) {
      // Box–Muller, both outputs of each pair: one Philox block (4 words)
      // gives the noise of 4 consecutive points.
      constexpr float kTwoPi = 6.28318530717958647692f;
      for (std::int64_t k = 0; k < kStressStrainPoints; k += 4) {
        const Philox4x32 bits(base + 1 + static_cast<std::uint64_t>(k / 4), seed);
        for (int pair = 0; pair < 2; ++pair) {
          const float radius = std::sqrt(-2.0f * std::log(uint_to_unit_float(bits.out[2 * pair])));
          const float angle = kTwoPi * uint_to_unit_float(bits.out[2 * pair + 1]);
          const std::int64_t point = k + 2 * pair;
          if (point < kStressStrainPoints) curve[3 * point + 1] += noise * radius * std::cos(angle);
          if (point + 1 < kStressStrainPoints) curve[3 * (point + 1) + 1] += noise * radius * std::sin(angle);
        }
      }
    }
    targets[2 * sample + 0] = youngs_gpa;
    targets[2 * sample + 1] = yield_mpa;
  }
};
static_assert(1 + (kStressStrainPoints + 3) / 4 <= static_cast<std::int64_t>(kBlocksPerSample));

}  // namespace

Dataset make_stress_strain(const StressStrainOptions& options) {
  DDL_CHECK(options.samples >= 0, "make_stress_strain: samples must be >= 0, got {}", options.samples);
  DDL_CHECK(options.stress_noise_mpa >= 0.0f && std::isfinite(options.stress_noise_mpa),
            "make_stress_strain: stress_noise_mpa must be finite and >= 0, got {}", options.stress_noise_mpa);
  DDL_CHECK(options.hardening_ratio >= 0.0f && std::isfinite(options.hardening_ratio),
            "make_stress_strain: hardening_ratio must be finite and >= 0, got {}", options.hardening_ratio);
  Dataset data{Tensor::empty(Shape{options.samples, kStressStrainPoints, 3}), Tensor::empty(Shape{options.samples, 2})};
  const CurveGenerator generate{data.inputs.data<float>(), data.targets.data<float>(), options.seed,
                                options.stress_noise_mpa, options.hardening_ratio};
  // Each sample is 600 floats of work, so parallelise over samples even for
  // a few thousand of them (parallel_for's grain is per element).
  if (options.samples >= 256) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < options.samples; ++i) generate(i);
  } else {
    for (std::int64_t i = 0; i < options.samples; ++i) generate(i);
  }
  return data;
}

}  // namespace ddl::models
