// ColumnParallelDense and RowParallelDense (see parallel_dense.hpp).
#include <ddl/parallel/tensor/parallel_dense.hpp>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/parallel/tensor/conjugate_ops.hpp>
#include <ddl/parallel/tensor/split_parameters.hpp>

namespace ddl::parallel {

using detail::check_splittable;
using detail::describe_split;
using detail::part_of;

ColumnParallelDense::ColumnParallelDense(const layers::Dense& whole, std::shared_ptr<const TensorGroup> group)
    : group_(std::move(group)), whole_(whole.describe()), out_features_(whole.weight().size(1)) {
  check_splittable("ColumnParallelDense", whole_, out_features_, "output features", *group_);
  weight_ = register_parameter("weight", part_of(whole.weight(), 1, *group_));
  if (whole.bias().defined()) bias_ = register_parameter("bias", part_of(whole.bias(), 0, *group_));
}

Tensor ColumnParallelDense::forward(const Tensor& input) {
  return layers::dense(copy_to_group(input, group_), weight_, bias_);
}

std::string ColumnParallelDense::describe() const {
  return describe_split("ColumnParallelDense", whole_, "output features", out_features_, *group_);
}

std::optional<SplitLayer::Split> ColumnParallelDense::split_of(const std::string& name) const {
  if (name == "weight") return Split{1, out_features_};
  if (name == "bias") return Split{0, out_features_};
  return std::nullopt;
}

RowParallelDense::RowParallelDense(const layers::Dense& whole, std::shared_ptr<const TensorGroup> group)
    : group_(std::move(group)), whole_(whole.describe()), in_features_(whole.weight().size(0)) {
  check_splittable("RowParallelDense", whole_, in_features_, "input features", *group_);
  weight_ = register_parameter("weight", part_of(whole.weight(), 0, *group_));
  if (whole.bias().defined()) bias_ = register_parameter("bias", whole.bias().detach().clone());
}

Tensor RowParallelDense::forward(const Tensor& input) {
  const std::int64_t features = weight_.size(0);
  DDL_CHECK(input.dim() >= 1 && input.size(-1) == features,
            "{}: input of shape {} has {} features, this rank's slice of the input expects {} (its share of {})",
            describe(), input.shape(), input.dim() >= 1 ? input.size(-1) : 0, features, in_features_);
  const Tensor sum = reduce_from_group(layers::dense(input, weight_, Tensor()), group_);
  return bias_.defined() ? sum + bias_ : sum;
}

std::string RowParallelDense::describe() const {
  return describe_split("RowParallelDense", whole_, "input features", in_features_, *group_);
}

std::optional<SplitLayer::Split> RowParallelDense::split_of(const std::string& name) const {
  if (name == "weight") return Split{0, in_features_};
  return std::nullopt;
}

}  // namespace ddl::parallel
