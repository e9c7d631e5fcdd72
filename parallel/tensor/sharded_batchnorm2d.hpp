// BatchNorm2d on an activation split by channels (between a column and a
// row convolution): this rank's channels of gamma, beta and the running
// statistics. Batch normalisation's statistics are per channel, so each
// rank computes exactly the values one process computes for its channels,
// with no communication.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/parallel/tensor/split_layer.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

class ShardedBatchNorm2d : public SplitLayer {
 public:
  ShardedBatchNorm2d(const layers::BatchNorm2d& whole, std::shared_ptr<const TensorGroup> group);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ShardedBatchNorm2d"; }
  std::string describe() const override;
  std::optional<Split> split_of(const std::string& name) const override;

 private:
  std::shared_ptr<const TensorGroup> group_;
  std::string whole_;
  std::int64_t channels_;
  layers::BatchNorm2dOptions options_;
  Tensor weight_, bias_, running_mean_, running_var_;
};

}  // namespace ddl::parallel
