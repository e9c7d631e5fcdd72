// The index kernels behind cross_entropy (one body for CPU and GPU; listed
// in layer_kernels.hpp). Internal: not installed.
#pragma once

#include <cmath>
#include <cstdint>

#include <ddl/core/macros.hpp>

namespace ddl::kernels {

// loss[r] = logsumexp(logits[r, :]) - logits[r, label[r]].
template <class Label>
struct CrossEntropyRows {
  const float* logits;
  const Label* labels;
  float* losses;
  std::int64_t classes;
  DDL_HOST_DEVICE void operator()(std::int64_t r) const {
    const float* row = logits + r * classes;
    float peak = row[0];
    for (std::int64_t c = 1; c < classes; ++c) peak = fmaxf(peak, row[c]);
    double total = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) total += expf(row[c] - peak);
    losses[r] = static_cast<float>(::log(total)) + peak - row[labels[r]];
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
    float peak = row[0];
    for (std::int64_t c = 1; c < classes; ++c) peak = fmaxf(peak, row[c]);
    double total = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) total += expf(row[c] - peak);
    const float row_scale = upstream[r * upstream_stride] * scale;
    const float inverse_total = static_cast<float>(1.0 / total);
    for (std::int64_t c = 0; c < classes; ++c) {
      const float p = expf(row[c] - peak) * inverse_total;
      out[c] = row_scale * (p - (c == static_cast<std::int64_t>(labels[r]) ? 1.0f : 0.0f));
    }
  }
};

}  // namespace ddl::kernels
