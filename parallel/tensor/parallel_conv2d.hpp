// Conv2d split over a tensor group, as parallel_dense.hpp splits Dense:
//
//   ColumnParallelConv2d   W[out_t, :, :, :], b[out_t]   input replicated,
//                          y_t = conv(copy_to(x), W_t) + b_t: this rank's
//                          output channels
//   RowParallelConv2d      W[:, in_t, :, :], b whole     input this rank's
//                          channels, y = reduce_from(conv(x_t, W_t)) + b:
//                          replicated
//
// (Conv2d's weight is OIHW, so a column layer splits dim 0 and a row layer
// dim 1.) Between a column and a row convolution the activation is split by
// channels, and every layer that acts on each channel alone (activations,
// BatchNorm2d on its channels, pooling, dropout) runs on this rank's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ddl/layers/conv2d.hpp>
#include <ddl/parallel/tensor/split_layer.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

class ColumnParallelConv2d : public SplitLayer {
 public:
  ColumnParallelConv2d(const layers::Conv2d& whole, std::shared_ptr<const TensorGroup> group);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ColumnParallelConv2d"; }
  std::string describe() const override;
  std::optional<Split> split_of(const std::string& name) const override;

 private:
  std::shared_ptr<const TensorGroup> group_;
  std::string whole_;  // the whole layer's description
  std::int64_t out_channels_;
  layers::Conv2dOptions options_;
  Tensor weight_, bias_;
};

class RowParallelConv2d : public SplitLayer {
 public:
  RowParallelConv2d(const layers::Conv2d& whole, std::shared_ptr<const TensorGroup> group);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "RowParallelConv2d"; }
  std::string describe() const override;
  std::optional<Split> split_of(const std::string& name) const override;

 private:
  std::shared_ptr<const TensorGroup> group_;
  std::string whole_;
  std::int64_t in_channels_;
  layers::Conv2dOptions options_;
  Tensor weight_, bias_;
};

}  // namespace ddl::parallel
