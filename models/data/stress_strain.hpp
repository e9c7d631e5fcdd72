// Synthetic uniaxial stress–strain curves for the materials-science MLP:
// each sample is a 200-point load–unload test of an elastic–plastic material
// with linear isotropic hardening, and the targets are its Young's modulus
// and yield stress.
#pragma once

#include <cstdint>

#include <ddl/models/data/dataset.hpp>

namespace ddl::models {

// Points per curve, of which the first kLoadingPoints load and the rest unload.
inline constexpr std::int64_t kStressStrainPoints = 200;
inline constexpr std::int64_t kStressStrainLoadingPoints = 150;

// Ranges the material parameters are drawn from, uniformly and independently.
inline constexpr float kYoungsModulusMinGPa = 50.0f;   // magnesium-like
inline constexpr float kYoungsModulusMaxGPa = 250.0f;  // steel-like
inline constexpr float kYieldStressMinMPa = 100.0f;
inline constexpr float kYieldStressMaxMPa = 1000.0f;
// The peak strain of each test; above the largest yield strain (1000 MPa /
// 50 GPa = 0.02), so every curve yields.
inline constexpr float kPeakStrainMin = 0.03f;
inline constexpr float kPeakStrainMax = 0.08f;

struct StressStrainOptions {
  std::int64_t samples = 1000;
  std::uint64_t seed = 0;
  // Standard deviation of Gaussian noise added to every stress value, in MPa
  // (0: exact curves).
  float stress_noise_mpa = 0.0f;
  // Hardening modulus H as a fraction of E: after yield the stress grows with
  // the tangent modulus E·H / (E + H).
  float hardening_ratio = 0.05f;
};

// N = options.samples curves:
//   inputs  float32 [N, 200, 3]: per point {strain (dimensionless),
//           stress (MPa), flag}; flag is 1 while loading (strain rising from 0
//           to the peak strain, points 0..149) and 0 while unloading
//           (points 150..199, strain falling elastically until the stress is 0).
//   targets float32 [N, 2]: {Young's modulus E in GPa, yield stress sigma_y in
//           MPa}, in the ranges above.
// The curve is the closed-form solution of 1-D rate-independent plasticity
// with linear isotropic hardening (Simo & Hughes, Computational Inelasticity,
// 1998, §1.4) on this monotone load–unload path:
//   loading:   sigma = E·eps for eps <= sigma_y/E, else
//              sigma_y + E·H/(E+H)·(eps − sigma_y/E);
//   unloading: sigma = sigma_peak − E·(eps_peak − eps), down to sigma = 0.
// Sample i draws from Philox4x32(counter = i·128 + block, key = seed) only,
// so the result is the same for any thread count and any N covering i.
// Generation runs on OpenMP threads; 1 M samples take 2.4 GB.
Dataset make_stress_strain(const StressStrainOptions& options = {});

}  // namespace ddl::models
