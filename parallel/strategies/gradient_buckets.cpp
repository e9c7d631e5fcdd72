// Gradient buckets (see gradient_buckets.hpp).
#include <ddl/parallel/strategies/gradient_buckets.hpp>

#include <algorithm>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>

namespace ddl::parallel {
namespace {

Device bucket_device(const std::vector<BucketEntry>& entries, bool on_gpu) {
  const Device first = entries.front().parameter.device();
  const bool shared = std::all_of(entries.begin(), entries.end(),
                                  [&](const BucketEntry& entry) { return entry.parameter.device() == first; });
  return shared && (first.is_cpu() || on_gpu) ? first : cpu();
}

}  // namespace

std::vector<GradientBucket> make_buckets(const std::vector<std::pair<std::string, Tensor>>& parameters,
                                         BucketSizes sizes, bool on_gpu, bool allocate) {
  DDL_CHECK(sizes.first_bytes > 0 && sizes.bytes > 0,
            "gradient buckets: sizes must be positive, got {} for the first bucket and {} for the others",
            sizes.first_bytes, sizes.bytes);
  std::vector<GradientBucket> buckets;
  std::int64_t filled = 0;  // elements in the last bucket
  bool open = false;        // whether the last bucket takes more
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    const auto& [name, parameter] = *it;
    DDL_CHECK(parameter.dtype() == DType::Float32, "gradient buckets: parameter '{}' is {}, not float32", name,
              parameter.dtype());
    if (!open) {
      buckets.emplace_back();
      filled = 0;
      open = true;
    }
    buckets.back().entries.push_back({name, parameter, filled, Tensor()});
    filled += parameter.numel();
    const std::int64_t limit = buckets.size() == 1 ? sizes.first_bytes : sizes.bytes;
    open = filled * static_cast<std::int64_t>(sizeof(float)) < limit;
  }
  if (allocate) {
    for (GradientBucket& bucket : buckets) allocate_buffer(bucket, bucket_device(bucket.entries, on_gpu));
  }
  return buckets;
}

void allocate_buffer(GradientBucket& bucket, const Device& device) {
  const BucketEntry& last = bucket.entries.back();
  bucket.buffer = zeros({last.offset + last.parameter.numel()}, {DType::Float32, device, false});
  for (BucketEntry& entry : bucket.entries) {
    if (entry.parameter.device() == device)
      entry.view = bucket.buffer.flat_slice(entry.offset, entry.parameter.shape());
  }
}

void release_buffer(GradientBucket& bucket) {
  bucket.buffer = Tensor();
  for (BucketEntry& entry : bucket.entries) entry.view = Tensor();
}

std::vector<std::string> describe_layout(const std::vector<GradientBucket>& buckets) {
  std::vector<std::string> lines;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    for (const BucketEntry& entry : buckets[b].entries) {
      lines.push_back(
          fmt::format("{} {} {} (bucket {})", entry.name, entry.parameter.shape(), entry.parameter.dtype(), b));
    }
  }
  return lines;
}

}  // namespace ddl::parallel
