// The two operators that make a pair of split layers exact (Megatron-LM's
// f and g), each the other's transpose, as autograd ops of their own:
//
//                 forward            backward
//   copy_to       identity           allreduce of the gradient
//   reduce_from   allreduce          identity
//
// A column-parallel layer reads a replicated input that every rank of the
// group uses for its own slice of the output: x feeds T products, so its
// gradient is the sum of the T products' input gradients, one per rank:
// copy_to puts that allreduce where backward needs it. A row-parallel
// layer's ranks each compute a partial product over their slice of the
// input features: reduce_from sums them into the replicated output in
// forward, and the output's gradient, already replicated, flows back to
// every rank's partial product unchanged. A column layer followed by a row
// layer (Megatron's pair) thus costs one allreduce in forward and one in
// backward, of the activations (rows x features), never of the weights.
#pragma once

#include <memory>

#include <ddl/core/tensor.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

Tensor copy_to_group(const Tensor& input, std::shared_ptr<const TensorGroup> group);
Tensor reduce_from_group(const Tensor& input, std::shared_ptr<const TensorGroup> group);

}  // namespace ddl::parallel
