// Gradient buckets (tensor fusion, as Horovod's fusion buffer and PyTorch
// DDP's Reducer): the parameters are grouped, in reverse registration order
// (the order backward produces their gradients), into buckets of about
// `bucket_bytes`; each bucket is one flat buffer reduced by a single
// allreduce, so a model with many small tensors pays a few latencies, not
// one per tensor.
//
// Where a parameter lives on the bucket's device, its gradient can be a view
// into the bucket (PyTorch DDP's gradient_as_bucket_view): backward then
// accumulates straight into the buffer that is reduced, and the averaged
// values are the gradient the optimizer reads, with no copy either way.
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
  Tensor view;              // the parameter's shape over its part of the buffer; undefined on another device

  // Whether `grad` is this entry's view (and so already in the buffer).
  bool in_buffer(const Tensor& grad) const {
    return view.defined() && grad.defined() && grad.raw_data() == view.raw_data();
  }
};

struct GradientBucket {
  std::vector<BucketEntry> entries;
  Tensor buffer;  // the gradients, flattened (float32)

  float* data() const { return buffer.data<float>(); }
  // Its elements, by its layout (also while its buffer is released).
  std::int64_t size() const { return entries.empty() ? 0 : entries.back().offset + entries.back().parameter.numel(); }
};

// A bucket's size limit: bucket 0's, and every later one's.
struct BucketSizes {
  // PyTorch DDP's first bucket (1 MiB): small, so the first allreduce
  // starts while most of backward is still ahead.
  std::int64_t first_bytes = std::int64_t{1} << 20;
  std::int64_t bytes = std::int64_t{25} << 20;
};

// Cuts `parameters` (in registration order) into buckets of float32
// gradients, walking them backwards: bucket 0 holds the last parameters,
// whose gradients backward produces first. As PyTorch DDP assigns them, a
// bucket takes parameters until it holds at least its limit, so the
// parameter that crosses the limit closes its bucket (mnist_cnn: the 5 KB
// last layer and the 4.7 MB dense weight before it fill bucket 0 and reduce
// while the convolutions' backward runs). A bucket's buffer lives on the
// device its parameters share if that is a CPU device, or a CUDA device
// and `on_gpu` (for NCCL); in host memory (cpu()) otherwise. Each entry on
// the buffer's device gets its view. Without `allocate` the buffers are
// left for allocate_buffer (sharded gradients make each only while it is
// filled and reduced).
std::vector<GradientBucket> make_buckets(const std::vector<std::pair<std::string, Tensor>>& parameters,
                                         BucketSizes sizes, bool on_gpu = false, bool allocate = true);

// A bucket's buffer, zeroed, on `device`, and each entry on that device
// its view; and the reverse, which frees the buffer (sharded data
// parallelism's stage 2 keeps a bucket only while it is being filled and
// reduced). Either leaves the parameters' .grad to the caller.
void allocate_buffer(GradientBucket& bucket, const Device& device);
void release_buffer(GradientBucket& bucket);

// One line per parameter, "name shape dtype", in bucket order: what the
// ranks compare before their first allreduce.
std::vector<std::string> describe_layout(const std::vector<GradientBucket>& buckets);

}  // namespace ddl::parallel
