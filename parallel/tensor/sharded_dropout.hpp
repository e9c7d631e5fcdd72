// Dropout on a sharded activation (this rank's features of a split
// layer's output): each rank draws the bits of its own features of the
// mask that the whole activation would get in one process
// (layers::dropout_of_part), so the ranks' masks differ, as Megatron's RNG
// tracker makes them, and together are one process's mask. A Dropout on a
// replicated activation stays a plain Dropout: every rank of the group
// draws the same mask from the same generator state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ddl/layers/dropout.hpp>
#include <ddl/parallel/tensor/split_layer.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

class ShardedDropout : public SplitLayer {
 public:
  // The dropout of `whole`, on this rank's part of `features` along `dim`
  // (the last dim of a Dense layer's output, dim 1 of a convolution's).
  ShardedDropout(const layers::Dropout& whole, int dim, std::int64_t features,
                 std::shared_ptr<const TensorGroup> group);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ShardedDropout"; }
  std::string describe() const override;
  std::optional<Split> split_of(const std::string& /*name*/) const override { return std::nullopt; }

 private:
  float p_;
  Generator* generator_;
  int dim_;
  std::int64_t features_;
  ChunkRange part_;
};

}  // namespace ddl::parallel
