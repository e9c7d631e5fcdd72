// Normalisation statistics and their validation against a sample's shape;
// both work on host copies, as the DataLoader gathers batches on the host.
#include <ddl/models/data/normalization.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>

namespace ddl::models {
namespace {

// NumPy broadcasting of `from` to exactly `to`: trailing dims aligned, each
// equal or 1, and no more dims than `to`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  const int skip = to.rank() - from.rank();
  for (int d = 0; d < from.rank(); ++d) {
    if (from[d] != 1 && from[d] != to[d + skip]) return false;
  }
  return true;
}

std::vector<float> broadcast_statistic(const Tensor& statistic, const char* name, const Shape& sample_shape) {
  DDL_CHECK(statistic.defined(), "Normalization: {} is undefined", name);
  DDL_CHECK(statistic.dtype() == DType::Float32, "Normalization: {} must be float32, got {}", name, statistic.dtype());
  DDL_CHECK(broadcasts_to(statistic.shape(), sample_shape),
            "Normalization: {} of shape {} does not broadcast to one sample of shape {}", name, statistic.shape(),
            sample_shape);
  return expand(statistic.detach().to(cpu()), sample_shape).to_vector<float>();
}

}  // namespace

SampleNormalization broadcast_to_sample(const Normalization& normalization, const Shape& sample_shape) {
  SampleNormalization result{broadcast_statistic(normalization.mean, "mean", sample_shape),
                             broadcast_statistic(normalization.stddev, "stddev", sample_shape)};
  for (const float value : result.stddev) {
    DDL_CHECK(value > 0.0f, "Normalization: every stddev must be > 0, got {}", value);
  }
  return result;
}

Normalization feature_normalization(const Tensor& inputs, int dim) {
  DDL_CHECK(inputs.defined() && inputs.dtype() == DType::Float32 && inputs.dim() >= 2,
            "feature_normalization: inputs must be float32 [N, ...] with at least 2 dims");
  const Shape& shape = inputs.shape();
  const int feature_dim = shape.normalize_dim(dim, "feature_normalization");
  DDL_CHECK(feature_dim >= 1, "feature_normalization: dim {} of inputs {} is the sample dim; pick one of 1..{}", dim,
            shape, shape.rank() - 1);

  // Row-major [outer, features, inner] view of the inputs around `dim`.
  const std::int64_t features = shape[feature_dim];
  std::int64_t inner = 1;
  for (int d = feature_dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  const std::int64_t outer = shape.numel() / std::max<std::int64_t>(features * inner, 1);
  const std::vector<float> values = inputs.to_vector<float>();
  const auto at = [&](std::int64_t o, std::int64_t f, std::int64_t i) {
    return static_cast<double>(values[static_cast<std::size_t>((o * features + f) * inner + i)]);
  };

  std::vector<float> means(static_cast<std::size_t>(features)), stddevs(static_cast<std::size_t>(features));
  const double count = static_cast<double>(outer * inner);
  for (std::int64_t f = 0; f < features; ++f) {
    // Two passes: the mean first, then squared deviations from it, which
    // keeps the variance accurate when the mean is large (Chan et al. 1983).
    double sum = 0.0;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) sum += at(o, f, i);
    const double mean = count > 0 ? sum / count : 0.0;
    double squares = 0.0;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) squares += (at(o, f, i) - mean) * (at(o, f, i) - mean);
    const double stddev = count > 0 ? std::sqrt(squares / count) : 0.0;
    means[static_cast<std::size_t>(f)] = static_cast<float>(mean);
    stddevs[static_cast<std::size_t>(f)] = stddev > 0.0 ? static_cast<float>(stddev) : 1.0f;
  }

  std::vector<std::int64_t> stat_dims(static_cast<std::size_t>(shape.rank() - 1), 1);
  stat_dims[static_cast<std::size_t>(feature_dim - 1)] = features;
  const Shape stat_shape(stat_dims);
  return {from_vector(means, stat_shape), from_vector(stddevs, stat_shape)};
}

}  // namespace ddl::models
