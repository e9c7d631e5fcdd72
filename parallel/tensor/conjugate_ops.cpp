// copy_to_group and reduce_from_group (see conjugate_ops.hpp).
#include <ddl/parallel/tensor/conjugate_ops.hpp>

#include <ddl/core/autograd.hpp>

namespace ddl::parallel {
namespace {

// A copy of `tensor` summed over the group: the tensor may be shared (an
// input saved by another op, a gradient given to several nodes).
Tensor summed(const Tensor& tensor, const TensorGroup& group) {
  Tensor sum = tensor.detach().clone();
  group.allreduce(sum);
  return sum;
}

}  // namespace

Tensor copy_to_group(const Tensor& input, std::shared_ptr<const TensorGroup> group) {
  Tensor output = input.detach();
  if (autograd::needs_grad({&input})) {
    autograd::record("CopyToTensorGroupBackward", {&input}, output,
                     [group](const Tensor& grad) { return std::vector{summed(grad, *group)}; });
  }
  return output;
}

Tensor reduce_from_group(const Tensor& input, std::shared_ptr<const TensorGroup> group) {
  Tensor output = summed(input, *group);
  if (autograd::needs_grad({&input})) {
    autograd::record("ReduceFromTensorGroupBackward", {&input}, output,
                     [](const Tensor& grad) { return std::vector{grad}; });
  }
  return output;
}

}  // namespace ddl::parallel
