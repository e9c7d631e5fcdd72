// ShardedDropout (see sharded_dropout.hpp).
#include <ddl/parallel/tensor/sharded_dropout.hpp>

#include <fmt/format.h>

#include <ddl/core/check.hpp>

namespace ddl::parallel {

ShardedDropout::ShardedDropout(const layers::Dropout& whole, int dim, std::int64_t features,
                               std::shared_ptr<const TensorGroup> group)
    : p_(whole.rate()), generator_(whole.generator()), dim_(dim), features_(features), part_(group->part(features)) {}

Tensor ShardedDropout::forward(const Tensor& input) {
  DDL_CHECK(input.dim() >= 1 && input.size(dim_) == part_.size(),
            "{}: input of shape {} does not hold this rank's {} features along dim {}", describe(), input.shape(),
            part_.size(), dim_);
  return layers::dropout_of_part(input, p_, is_training(), dim_, part_.begin, features_, generator_);
}

std::string ShardedDropout::describe() const {
  return fmt::format("ShardedDropout({}; features [{}, {}) of {})", p_, part_.begin, part_.end, features_);
}

}  // namespace ddl::parallel
