// Gradient buckets (tensor fusion, as Horovod's fusion buffer and PyTorch
// DDP's Reducer): the parameters are grouped, in reverse registration order
// (the order backward produces their gradients), into buckets of about
// `bucket_bytes`; each bucket is one flat host buffer reduced by a single
// allreduce, so a model with many small tensors pays a few latencies, not
// one per tensor.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::parallel {

struct BucketEntry {
  std::string name;
  Tensor parameter;
  std::int64_t offset = 0;  // in elements, within the bucket's buffer
};

struct GradientBucket {
  std::vector<BucketEntry> entries;
  std::vector<float> buffer;  // the gradients, flattened
};

// Cuts `parameters` (in registration order) into buckets of at most
// `bucket_bytes` of float32 gradients each, walking them backwards; a
// parameter larger than the limit gets a bucket of its own. Bucket 0 holds
// the last parameters, whose gradients backward produces first.
std::vector<GradientBucket> make_buckets(const std::vector<std::pair<std::string, Tensor>>& parameters,
                                         std::int64_t bucket_bytes);

// One line per parameter, "name shape dtype", in bucket order: what the
// ranks compare before their first allreduce.
std::vector<std::string> describe_layout(const std::vector<GradientBucket>& buckets);

}  // namespace ddl::parallel
