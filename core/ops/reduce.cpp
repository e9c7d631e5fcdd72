// Reductions (sum, mean, max along a dim or over everything) and the two
// broadcasting helpers that are each other's backward: expand and sum_to.
#include <ddl/core/ops/helpers.hpp>

namespace ddl {

using namespace ops_detail;

Tensor sum(const Tensor& x) {
  require_float(x, "sum");
  Tensor y = empty_float(Shape{}, x.device());
  backend::sum_all(x.device(), x.data<float>(), x.numel(), y.data<float>());
  if (autograd::needs_grad({&x})) {
    autograd::record("SumBackward", {&x}, y,
                     [shape = x.shape()](const Tensor& g) { return std::vector{expand(g, shape)}; });
  }
  return y;
}

Tensor sum(const Tensor& x, int dim, bool keepdim) {
  require_float(x, "sum");
  const int d = x.shape().normalize_dim(dim, "sum");
  const LaneView view = lanes_around(x.shape(), d);
  Tensor y = empty_float(reduced_shape(x.shape(), d, keepdim), x.device());
  backend::launch(x.device(), view.count, kernels::SumLanes{x.data<float>(), y.data<float>(), view.lanes});
  if (autograd::needs_grad({&x})) {
    autograd::record("SumDimBackward", {&x}, y,
                     [shape = x.shape(), kept = reduced_shape(x.shape(), d, true)](const Tensor& g) {
                       return std::vector{expand(g.reshape(kept), shape)};
                     });
  }
  return y;
}

Tensor mean(const Tensor& x) {
  require_float(x, "mean");
  DDL_CHECK(x.numel() > 0, "mean: the tensor of shape {} is empty", x.shape());
  return mul(sum(x), 1.0f / static_cast<float>(x.numel()));
}

Tensor mean(const Tensor& x, int dim, bool keepdim) {
  require_float(x, "mean");
  const int d = x.shape().normalize_dim(dim, "mean");
  DDL_CHECK(x.shape()[d] > 0, "mean: dim {} of shape {} is empty", dim, x.shape());
  return mul(sum(x, d, keepdim), 1.0f / static_cast<float>(x.shape()[d]));
}

MaxResult max(const Tensor& x, int dim, bool keepdim) {
  require_float(x, "max");
  const int d = x.shape().normalize_dim(dim, "max");
  DDL_CHECK(x.shape()[d] > 0, "max: dim {} of shape {} is empty", dim, x.shape());
  const LaneView view = lanes_around(x.shape(), d);
  const Shape shape = reduced_shape(x.shape(), d, keepdim);
  MaxResult result{empty_float(shape, x.device()), Tensor::empty(shape, {DType::Int64, x.device(), false})};
  backend::launch(x.device(), view.count,
                  kernels::MaxLanes{x.data<float>(), result.values.data<float>(),
                                    result.indices.data<std::int64_t>(), view.lanes});
  if (autograd::needs_grad({&x})) {
    autograd::record(
        "MaxBackward", {&x}, result.values, [shape = x.shape(), indices = result.indices, view](const Tensor& g) {
          Tensor grad_in = zeros(shape, {DType::Float32, g.device(), false});
          backend::launch(
              g.device(), view.count,
              kernels::ScatterLanes{g.data<float>(), indices.data<std::int64_t>(), grad_in.data<float>(), view.lanes});
          return std::vector{grad_in};
        });
  }
  return result;
}

Tensor argmax(const Tensor& x, int dim, bool keepdim) {
  const NoGradGuard no_grad;
  return max(x, dim, keepdim).indices;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  require_float(x, "sum_to");
  if (x.shape() == shape) return x;
  const Shape& from = x.shape();
  DDL_CHECK(broadcast_shapes(shape, from, "sum_to") == from, "sum_to: shape {} is not a broadcast of {}", from,
            shape);
  Tensor reduced = x;
  const int extra = from.rank() - shape.rank();
  for (int d = 0; d < from.rank(); ++d) {
    const std::int64_t target = d < extra ? 1 : shape[d - extra];
    if (target == 1 && from[d] != 1) reduced = sum(reduced, d, true);
  }
  return reduced.reshape(shape);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  require_float(x, "expand");
  DDL_CHECK(broadcast_shapes(x.shape(), shape, "expand") == shape, "expand: cannot broadcast shape {} to {}",
            x.shape(), shape);
  Tensor y = empty_float(shape, x.device());
  backend::launch(x.device(), y.numel(),
                  kernels::BroadcastCopy{x.data<float>(), y.data<float>(),
                                         kernels::BroadcastIndex::make(x.shape(), shape)});
  if (autograd::needs_grad({&x})) {
    autograd::record("ExpandBackward", {&x}, y,
                     [from = x.shape()](const Tensor& g) { return std::vector{sum_to(g, from)}; });
  }
  return y;
}

}  // namespace ddl
