// ZeRO stage 3's forward pass (sharding.hpp): a Sequential's layers run one
// by one, each bucket's parameters gathered just before the first layer
// that uses them and released after the last, so at most the buckets of
// the layer running (and, with prefetch, the next one's) are whole.
#pragma once

#include <memory>

#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/parallel/strategies/sharding.hpp>

namespace ddl::parallel {

// The model's output for `input`. With `for_backward`, the output of each
// bucket's last layer passes through a node whose backward gathers the
// bucket again before the gradient reaches its layers (PyTorch FSDP's
// pre-backward hook); DataParallel releases it once the bucket's gradients
// are all in. ddl::Error for a model that is not a Sequential, or a
// parameter in no bucket.
Tensor gathered_forward(layers::Module& model, const Tensor& input, const std::shared_ptr<ShardedState>& state,
                        bool for_backward);

}  // namespace ddl::parallel
