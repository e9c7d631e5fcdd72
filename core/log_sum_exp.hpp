// The log-sum-exp of one lane of logits, kept in two exact parts so that
// log-probabilities near zero keep their precision: used by softmax,
// log-softmax and cross-entropy, on the CPU and in CUDA kernels alike.
// Internal: not installed.
#pragma once

#include <cmath>
#include <cstdint>

#include <ddl/core/macros.hpp>

namespace ddl::kernels {

// log(sum_k exp(x_k)) = peak + log1p(rest), with rest = sum over k != top of
// exp(x_k - peak). A winning class's log-probability is -log1p(rest): tiny
// beside logits of 20 to 100, it would lose every digit if formed as
// (peak + log(1 + rest)) - peak in float. The differences x_k - peak are
// taken in double: rounded to float, a gap of 100 carries 100 * 2^-24 into
// exp.
struct LaneLogSumExp {
  std::int64_t top;      // first index of the largest value
  double peak;           // that value
  double log1p_rest;

  // log(softmax(x)_k) in double, before its one rounding to float.
  DDL_HOST_DEVICE double log_probability(float x_k) const { return (static_cast<double>(x_k) - peak) - log1p_rest; }
};

DDL_HOST_DEVICE inline LaneLogSumExp lane_log_sum_exp(const float* x, std::int64_t n, std::int64_t step) {
  std::int64_t top = 0;
  for (std::int64_t k = 1; k < n; ++k) {
    if (x[k * step] > x[top * step]) top = k;
  }
  const double peak = x[top * step];
  double rest = 0.0;
  for (std::int64_t k = 0; k < n; ++k) {
    if (k != top) rest += ::exp(static_cast<double>(x[k * step]) - peak);
  }
  return {top, peak, ::log1p(rest)};
}

}  // namespace ddl::kernels
