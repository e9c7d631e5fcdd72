// ShardedBatchNorm2d (see sharded_batchnorm2d.hpp).
#include <ddl/parallel/tensor/sharded_batchnorm2d.hpp>

#include <ddl/parallel/tensor/split_parameters.hpp>

namespace ddl::parallel {

using detail::part_of;

ShardedBatchNorm2d::ShardedBatchNorm2d(const layers::BatchNorm2d& whole, std::shared_ptr<const TensorGroup> group)
    : group_(std::move(group)), whole_(whole.describe()), channels_(whole.num_features()), options_(whole.options()) {
  detail::check_splittable("ShardedBatchNorm2d", whole_, channels_, "channels", *group_);
  weight_ = register_parameter("weight", part_of(whole.weight(), 0, *group_));
  bias_ = register_parameter("bias", part_of(whole.bias(), 0, *group_));
  running_mean_ = register_buffer("running_mean", part_of(whole.running_mean(), 0, *group_));
  running_var_ = register_buffer("running_var", part_of(whole.running_var(), 0, *group_));
}

Tensor ShardedBatchNorm2d::forward(const Tensor& input) {
  return layers::batch_norm2d(input, weight_, bias_, running_mean_, running_var_, is_training(), options_);
}

std::string ShardedBatchNorm2d::describe() const {
  return detail::describe_split("ShardedBatchNorm2d", whole_, "channels", channels_, *group_);
}

std::optional<SplitLayer::Split> ShardedBatchNorm2d::split_of(const std::string& /*name*/) const {
  return Split{0, channels_};
}

}  // namespace ddl::parallel
