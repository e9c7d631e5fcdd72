// Batch normalisation on the CPU: one channel per OpenMP iteration, each
// channel's sums in double over its N*H*W values, in a fixed order, so the
// result is the same for every thread count. The variance is two-pass
// (mean first, then squared deviations), which does not cancel
// catastrophically for inputs with a large mean.
#include <ddl/core/cpu/parallel_for.hpp>
#include <ddl/layers/batchnorm2d_kernels.hpp>

#include <cmath>

namespace ddl::layers::batchnorm2d_detail {
namespace {

// Runs body(c) for every channel, on OpenMP threads when the tensor is large
// enough to pay for waking them.
template <class Body>
void for_each_channel(const Geometry& g, const Body& body) {
  const std::int64_t work = g.channels * g.per_channel();
#pragma omp parallel for schedule(static) if (work >= cpu_backend::kParallelGrain)
  for (std::int64_t c = 0; c < g.channels; ++c) body(c);
}

// Calls visit(offset) for the flat offset of every value of channel c:
// x[(n * C + c) * H * W + s] for each n and s.
template <class Visit>
void for_each_value(const Geometry& g, std::int64_t c, const Visit& visit) {
  const std::int64_t plane = g.height * g.width;
  for (std::int64_t n = 0; n < g.batch; ++n) {
    const std::int64_t base = (n * g.channels + c) * plane;
    for (std::int64_t s = 0; s < plane; ++s) visit(base + s);
  }
}

// y = (x - mean) * (gamma * invstd) + beta over channel c.
void normalise_channel(const Geometry& g, std::int64_t c, const float* x, float* y, double mean, double invstd,
                       float gamma, float beta) {
  const auto mean_f = static_cast<float>(mean);
  const auto scale = static_cast<float>(gamma * invstd);
  for_each_value(g, c, [&](std::int64_t i) { y[i] = (x[i] - mean_f) * scale + beta; });
}

}  // namespace

void forward_training_cpu(const Geometry& g, const ForwardTraining& b, double momentum, double eps) {
  const auto count = static_cast<double>(g.per_channel());
  for_each_channel(g, [&](std::int64_t c) {
    double total = 0.0;
    for_each_value(g, c, [&](std::int64_t i) { total += b.x[i]; });
    const double mean = total / count;
    double squares = 0.0;
    for_each_value(g, c, [&](std::int64_t i) {
      const double deviation = b.x[i] - mean;
      squares += deviation * deviation;
    });
    const double variance = squares / count;  // biased: what normalises
    const double invstd = 1.0 / std::sqrt(variance + eps);
    normalise_channel(g, c, b.x, b.y, mean, invstd, b.gamma[c], b.beta[c]);
    b.save_mean[c] = static_cast<float>(mean);
    b.save_invstd[c] = static_cast<float>(invstd);
    // The running variance estimates the population's: unbiased (Bessel).
    const double unbiased = variance * count / (count - 1.0);
    b.running_mean[c] = static_cast<float>((1.0 - momentum) * b.running_mean[c] + momentum * mean);
    b.running_var[c] = static_cast<float>((1.0 - momentum) * b.running_var[c] + momentum * unbiased);
  });
}

void forward_inference_cpu(const Geometry& g, const ForwardInference& b, double eps) {
  for_each_channel(g, [&](std::int64_t c) {
    const double invstd = 1.0 / std::sqrt(static_cast<double>(b.running_var[c]) + eps);
    normalise_channel(g, c, b.x, b.y, b.running_mean[c], invstd, b.gamma[c], b.beta[c]);
  });
}

// With x_hat = (x - mean) * invstd and M values per channel (Ioffe & Szegedy
// 2015, section 3):
//   dbeta = sum(dy), dgamma = sum(dy * x_hat),
//   dx = gamma * invstd / M * (M * dy - dbeta - x_hat * dgamma).
void backward_training_cpu(const Geometry& g, const BackwardTraining& b) {
  const auto count = static_cast<double>(g.per_channel());
  for_each_channel(g, [&](std::int64_t c) {
    const double mean = b.save_mean[c], invstd = b.save_invstd[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for_each_value(g, c, [&](std::int64_t i) {
      sum_dy += b.dy[i];
      sum_dy_xhat += b.dy[i] * ((b.x[i] - mean) * invstd);
    });
    b.dbeta[c] = static_cast<float>(sum_dy);
    b.dgamma[c] = static_cast<float>(sum_dy_xhat);
    const double scale = b.gamma[c] * invstd / count;
    for_each_value(g, c, [&](std::int64_t i) {
      const double x_hat = (b.x[i] - mean) * invstd;
      b.dx[i] = static_cast<float>(scale * (count * b.dy[i] - sum_dy - x_hat * sum_dy_xhat));
    });
  });
}

}  // namespace ddl::layers::batchnorm2d_detail
