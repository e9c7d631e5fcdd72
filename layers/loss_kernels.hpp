// The index kernels behind cross_entropy (one body for CPU and GPU; listed
// in layer_kernels.hpp). Internal: not installed.
#pragma once

#include <cmath>
#include <cstdint>

#include <ddl/core/log_sum_exp.hpp>
#include <ddl/core/macros.hpp>

namespace ddl::kernels {

// loss[r] = logsumexp(logits[r, :]) - logits[r, label[r]]: minus the label's
// log-probability, formed in double and rounded once (core/log_sum_exp.hpp).
template <class Label>
struct CrossEntropyRows {
  const float* logits;
  const Label* labels;
  float* losses;
  std::int64_t classes;
  DDL_HOST_DEVICE void operator()(std::int64_t r) const {
    const float* row = logits + r * classes;
    losses[r] = static_cast<float>(-lane_log_sum_exp(row, classes, 1).log_probability(row[labels[r]]));
  }
};

// d loss / d logits[r, c] = upstream[r * upstream_stride] * scale *
// (softmax(logits[r])[c] - [c == label[r]]): a mean's or sum's one upstream
// gradient (stride 0) with scale 1/N or 1, or one per row (stride 1, no
// reduction) with scale 1.
template <class Label>
struct CrossEntropyGradRows {
  const float* logits;
  const Label* labels;
  const float* upstream;
  std::int64_t upstream_stride;
  float* grad;
  std::int64_t classes;
  float scale;
  DDL_HOST_DEVICE void operator()(std::int64_t r) const {
    const float* row = logits + r * classes;
    float* out = grad + r * classes;
    const LaneLogSumExp lse = lane_log_sum_exp(row, classes, 1);
    const double row_scale = static_cast<double>(upstream[r * upstream_stride]) * scale;
    const auto label = static_cast<std::int64_t>(labels[r]);
    for (std::int64_t c = 0; c < classes; ++c) {
      // p - 1 for the label by expm1: a confident row's p rounds to 1, and
      // its gradient, -(1 - p), to 0.
      const double log_p = lse.log_probability(row[c]);
      out[c] = static_cast<float>(row_scale * (c == label ? ::expm1(log_p) : ::exp(log_p)));
    }
  }
};

}  // namespace ddl::kernels
