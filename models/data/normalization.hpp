// Input normalisation applied by the DataLoader while it gathers a batch,
// x' = (x - mean) / stddev, and the per-feature statistics that set it.
#pragma once

#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::models {

// float32 tensors, each broadcastable (NumPy rules) to the shape of ONE
// sample, i.e. the inputs' shape without dim 0: [1, 1, 1] for one grey
// channel of [N, 1, 28, 28] images, [3] or [1, 3] for the last-dim features
// of [N, 200, 3] curves. Every stddev value must be > 0.
struct Normalization {
  Tensor mean;
  Tensor stddev;
};

// The mean and population standard deviation of `inputs` (float32 [N, ...])
// for each index of `dim` (1 <= dim < rank, or negative from the end), taken
// over every other dim, sample dim included; accumulated in double. Both have
// the sample's rank with extent 1 everywhere but at `dim`: [1, 1, 1] for
// dim 1 of [N, 1, 28, 28], [1, 3] for dim 2 of [N, 200, 3]. A feature that is
// constant gets stddev 1 rather than 0, so normalising it only centres it.
Normalization feature_normalization(const Tensor& inputs, int dim);

// mean and stddev broadcast to a whole sample of `sample_shape`, flattened
// row-major on the host: what the DataLoader applies element by element.
struct SampleNormalization {
  std::vector<float> mean;
  std::vector<float> stddev;
};

// Throws ddl::Error naming the shapes when mean or stddev is undefined, not
// float32 or not broadcastable to `sample_shape`, and naming the value when a
// stddev is not > 0.
SampleNormalization broadcast_to_sample(const Normalization& normalization, const Shape& sample_shape);

}  // namespace ddl::models
