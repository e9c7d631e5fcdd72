// Losses, each the mean over the batch.
//   cross_entropy: softmax cross-entropy fused with log-softmax, from raw
//     logits [N, C] and integer labels [N] (int32 or int64) or one-hot /
//     probability targets [N, C]. Each row is shifted by its max, so logits
//     of +-1e4 give finite losses and gradients.
//   mse: mean((prediction - target)^2); mae: mean(|prediction - target|).
#pragma once

#include <cmath>
#include <cstdint>

#include <ddl/core/macros.hpp>
#include <ddl/core/tensor.hpp>

namespace ddl::layers {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
Tensor mse_loss(const Tensor& prediction, const Tensor& target);
Tensor mae_loss(const Tensor& prediction, const Tensor& target);

}  // namespace ddl::layers

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

// d loss / d logits[r, c] = scale * (softmax(logits[r])[c] - [c == label[r]]),
// scale = upstream gradient / N.
template <class Label>
struct CrossEntropyGradRows {
  const float* logits;
  const Label* labels;
  const float* upstream;  // one element: the gradient of the mean loss
  float* grad;
  std::int64_t classes;
  float inverse_batch;
  DDL_HOST_DEVICE void operator()(std::int64_t r) const {
    const float* row = logits + r * classes;
    float* out = grad + r * classes;
    float peak = row[0];
    for (std::int64_t c = 1; c < classes; ++c) peak = fmaxf(peak, row[c]);
    double total = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) total += expf(row[c] - peak);
    const float scale = upstream[0] * inverse_batch;
    const float inverse_total = static_cast<float>(1.0 / total);
    for (std::int64_t c = 0; c < classes; ++c) {
      const float p = expf(row[c] - peak) * inverse_total;
      out[c] = scale * (p - (c == static_cast<std::int64_t>(labels[r]) ? 1.0f : 0.0f));
    }
  }
};

}  // namespace ddl::kernels
