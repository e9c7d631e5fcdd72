// Internal helpers shared by the op files: input checks that produce the
// library's error messages, result allocation, and the map/lanes plumbing
// between tensors and the index kernels.
#pragma once

#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/kernels.hpp>
#include <ddl/core/ops.hpp>

namespace ddl::ops_detail {

inline void require_float(const Tensor& x, const char* op) {
  DDL_CHECK(x.defined(), "{}: input tensor is undefined", op);
  DDL_CHECK(x.dtype() == DType::Float32, "{}: expected a float32 tensor, got {} of shape {}", op, x.dtype(),
            x.shape());
}

inline void require_same_device(const Tensor& a, const Tensor& b, const char* op) {
  DDL_CHECK(a.device() == b.device(), "{}: tensors are on different devices ({} with shape {}, {} with shape {})", op,
            a.device(), a.shape(), b.device(), b.shape());
}

inline Tensor empty_float(const Shape& shape, const Device& device) {
  return Tensor::empty(shape, {DType::Float32, device, false});
}

inline void record(const char* name, const std::vector<const Tensor*>& inputs, Tensor& output,
                   autograd::BackwardFn backward) {
  autograd::record(std::make_shared<autograd::FunctionNode>(name, std::move(backward)), inputs, output);
}

// y[i] = op(x[i]).
template <class Op>
Tensor map1(const Tensor& x, Op op) {
  Tensor y = empty_float(x.shape(), x.device());
  backend::launch(x.device(), x.numel(), kernels::Map1<Op>{x.data<float>(), y.data<float>(), op});
  return y;
}

// y = op(a, b) with a and b broadcast to a common shape.
template <class Op>
Tensor map2(const Tensor& a, const Tensor& b, Op op, const char* name) {
  require_float(a, name);
  require_float(b, name);
  require_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor y = empty_float(shape, a.device());
  if (a.shape() == shape && b.shape() == shape) {
    backend::launch(a.device(), y.numel(), kernels::Zip2<Op>{a.data<float>(), b.data<float>(), y.data<float>(), op});
  } else {
    backend::launch(a.device(), y.numel(),
                    kernels::Map2<Op>{a.data<float>(), b.data<float>(), y.data<float>(),
                                      kernels::BroadcastIndex::make(a.shape(), shape),
                                      kernels::BroadcastIndex::make(b.shape(), shape), op});
  }
  return y;
}

// The [outer, n, inner] view of `shape` around `dim`, and the output count.
struct LaneView {
  kernels::Lanes lanes;
  std::int64_t count;  // outer * inner
};
inline LaneView lanes_around(const Shape& shape, int dim) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= shape[d];
  for (int d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  // Counted directly, not as numel / n: an empty dim still has lanes (a sum
  // over it writes zeros).
  return {{shape[dim], inner}, outer * inner};
}

// `shape` with `dim` removed (or set to 1 when keepdim).
inline Shape reduced_shape(const Shape& shape, int dim, bool keepdim) {
  std::vector<std::int64_t> dims = shape.to_vector();
  if (keepdim) {
    dims[static_cast<std::size_t>(dim)] = 1;
  } else {
    dims.erase(dims.begin() + dim);
  }
  return Shape(dims);
}

}  // namespace ddl::ops_detail
