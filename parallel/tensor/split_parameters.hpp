// (internal) What the split layers share: cutting a whole layer's
// parameter to this rank's part, checking a layer can be split, and the
// description every split layer gives.
#pragma once

#include <cstdint>
#include <string>

#include <ddl/core/tensor.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel::detail {

// This rank's part of `whole` along `dim`, a tensor of its own.
Tensor part_of(const Tensor& whole, int dim, const TensorGroup& group);

// ddl::Error unless `count` (the whole layer's features or channels along
// the split) gives every rank of the group at least one.
void check_splittable(const char* type, const std::string& whole, std::int64_t count, const char* what,
                      const TensorGroup& group);

// "ColumnParallelDense(Dense(784, 128); out features [0, 64) on rank 0 of 2)"
std::string describe_split(const char* type, const std::string& whole, const char* what, std::int64_t count,
                           const TensorGroup& group);

}  // namespace ddl::parallel::detail
