// Dense layers split over a tensor group (tensor_group.hpp), made from the
// whole layer so that every rank's slice holds the whole model's weights:
//
//   ColumnParallelDense   W[:, cols_t], b[cols_t]   y_t = copy_to(x) W_t + b_t
//                         input replicated, output this rank's features
//   RowParallelDense      W[rows_t, :], b whole      y = reduce_from(x_t W_t) + b
//                         input this rank's features, output replicated
//
// (Dense's weight is [in, out], so a column layer splits dim 1 and a row
// layer dim 0; Megatron's [out, in] weights are split the other way round.)
// A column layer followed by a row layer needs no communication between
// them: the row layer's input features are the column layer's output
// features. The row layer's bias is added once, after the sum; every rank
// holds it whole and computes the same gradient for it from the replicated
// output gradient.
//
// Each parameter keeps the name Dense gives it ("weight", "bias"), with
// the shape of this rank's slice (split_layer.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <ddl/layers/dense.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/parallel/tensor/split_layer.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

class ColumnParallelDense : public SplitLayer {
 public:
  ColumnParallelDense(const layers::Dense& whole, std::shared_ptr<const TensorGroup> group);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ColumnParallelDense"; }
  std::string describe() const override;
  std::optional<Split> split_of(const std::string& name) const override;

 private:
  std::shared_ptr<const TensorGroup> group_;
  std::string whole_;  // the whole layer's description
  std::int64_t out_features_;
  Tensor weight_, bias_;
};

class RowParallelDense : public SplitLayer {
 public:
  RowParallelDense(const layers::Dense& whole, std::shared_ptr<const TensorGroup> group);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "RowParallelDense"; }
  std::string describe() const override;
  std::optional<Split> split_of(const std::string& name) const override;

 private:
  std::shared_ptr<const TensorGroup> group_;
  std::string whole_;
  std::int64_t in_features_;
  Tensor weight_, bias_;
};

}  // namespace ddl::parallel
