// ColumnParallelConv2d and RowParallelConv2d (see parallel_conv2d.hpp).
#include <ddl/parallel/tensor/parallel_conv2d.hpp>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/parallel/tensor/conjugate_ops.hpp>
#include <ddl/parallel/tensor/split_parameters.hpp>

namespace ddl::parallel {

using detail::check_splittable;
using detail::describe_split;
using detail::part_of;

ColumnParallelConv2d::ColumnParallelConv2d(const layers::Conv2d& whole, std::shared_ptr<const TensorGroup> group)
    : group_(std::move(group)),
      whole_(whole.describe()),
      out_channels_(whole.weight().size(0)),
      options_(whole.options()) {
  check_splittable("ColumnParallelConv2d", whole_, out_channels_, "output channels", *group_);
  weight_ = register_parameter("weight", part_of(whole.weight(), 0, *group_));
  if (whole.bias().defined()) bias_ = register_parameter("bias", part_of(whole.bias(), 0, *group_));
}

Tensor ColumnParallelConv2d::forward(const Tensor& input) {
  return layers::conv2d(copy_to_group(input, group_), weight_, bias_, options_);
}

std::string ColumnParallelConv2d::describe() const {
  return describe_split("ColumnParallelConv2d", whole_, "output channels", out_channels_, *group_);
}

std::optional<SplitLayer::Split> ColumnParallelConv2d::split_of(const std::string& name) const {
  if (name == "weight" || name == "bias") return Split{0, out_channels_};
  return std::nullopt;
}

RowParallelConv2d::RowParallelConv2d(const layers::Conv2d& whole, std::shared_ptr<const TensorGroup> group)
    : group_(std::move(group)),
      whole_(whole.describe()),
      in_channels_(whole.weight().size(1)),
      options_(whole.options()) {
  check_splittable("RowParallelConv2d", whole_, in_channels_, "input channels", *group_);
  weight_ = register_parameter("weight", part_of(whole.weight(), 1, *group_));
  if (whole.bias().defined()) bias_ = register_parameter("bias", whole.bias().detach().clone());
}

Tensor RowParallelConv2d::forward(const Tensor& input) {
  const std::int64_t channels = weight_.size(1);
  DDL_CHECK(input.dim() == 4 && input.size(1) == channels,
            "{}: input of shape {} does not hold this rank's {} input channels (its share of {})", describe(),
            input.shape(), channels, in_channels_);
  const Tensor sum = reduce_from_group(layers::conv2d(input, weight_, Tensor(), options_), group_);
  return bias_.defined() ? sum + bias_.reshape({bias_.size(0), 1, 1}) : sum;
}

std::string RowParallelConv2d::describe() const {
  return describe_split("RowParallelConv2d", whole_, "input channels", in_channels_, *group_);
}

std::optional<SplitLayer::Split> RowParallelConv2d::split_of(const std::string& name) const {
  if (name == "weight") return Split{1, in_channels_};
  return std::nullopt;
}

}  // namespace ddl::parallel
