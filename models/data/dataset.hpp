// Dataset: a whole data set held in memory as two tensors whose first dim
// indexes the samples. The loaders in models/ return one; a DataLoader
// batches and shuffles it.
#pragma once

#include <cstdint>

#include <ddl/core/tensor.hpp>

namespace ddl::models {

struct Dataset {
  // float32 [N, ...]: one sample per row of the first dim.
  Tensor inputs;
  // int64 [N] class labels, or float32 [N, k] regression targets.
  Tensor targets;

  // The number of samples N (0 for an empty, default-constructed Dataset).
  std::int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

}  // namespace ddl::models
