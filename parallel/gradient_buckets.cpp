// Gradient buckets (see gradient_buckets.hpp).
#include <ddl/parallel/gradient_buckets.hpp>

#include <ddl/core/check.hpp>

namespace ddl::parallel {

std::vector<GradientBucket> make_buckets(const std::vector<std::pair<std::string, Tensor>>& parameters,
                                         std::int64_t bucket_bytes) {
  DDL_CHECK(bucket_bytes > 0, "gradient buckets: bucket_bytes must be positive, got {}", bucket_bytes);
  std::vector<GradientBucket> buckets;
  std::int64_t filled = 0;
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    const auto& [name, parameter] = *it;
    DDL_CHECK(parameter.dtype() == DType::Float32, "gradient buckets: parameter '{}' is {}, not float32", name,
              parameter.dtype());
    const std::int64_t bytes = parameter.numel() * static_cast<std::int64_t>(sizeof(float));
    if (buckets.empty() || (filled > 0 && filled + bytes > bucket_bytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    GradientBucket& bucket = buckets.back();
    bucket.entries.push_back({name, parameter, static_cast<std::int64_t>(bucket.buffer.size())});
    bucket.buffer.resize(bucket.buffer.size() + static_cast<std::size_t>(parameter.numel()));
    filled += bytes;
  }
  return buckets;
}

std::vector<std::string> describe_layout(const std::vector<GradientBucket>& buckets) {
  std::vector<std::string> lines;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    for (const BucketEntry& entry : buckets[b].entries) {
      lines.push_back(fmt::format("{} {} {} (bucket {})", entry.name, entry.parameter.shape(), entry.parameter.dtype(),
                                  b));
    }
  }
  return lines;
}

}  // namespace ddl::parallel
