// Internal helpers shared by core's op files: the map/lanes plumbing between
// tensors and the index kernels. (The input checks, result allocation and
// recording that ops outside core need too are public: op_checks.hpp,
// ops.hpp, autograd.hpp.)
#pragma once

#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/kernels.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>

namespace ddl::ops_detail {

// op(a) @ op(b) on the backend's GEMM, op transposing the last two dims
// when asked (linalg.cpp); no autograd.
Tensor gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const char* name);
// c += op(a) @ op(b), straight into c (the GEMM's beta = 1: no product
// materialised); c has the product's shape.
void gemm_accumulate(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const char* name);
// A weight's gradient xᵀ·gradient added straight into `grad` (its .grad)
// and the weight's hooks run, as its accumulator would run them.
void add_weight_gradient(const std::shared_ptr<TensorImpl>& weight, const Tensor& grad, const Tensor& x,
                         const Tensor& gradient, const char* name);

// y[i] = op(x[i]). Element by element, so in whatever order x's elements
// are stored (core/memory_form.hpp): y comes out in the same.
template <class Op>
Tensor map1(const Tensor& x, Op op) {
  Tensor y = empty_float(x.shape(), x.device());
  const std::shared_ptr<const MemoryForm> form = x.stored_form();
  const float* in = form ? static_cast<const float*>(x.stored_data()) : x.data<float>();
  backend::launch(x.device(), x.numel(), kernels::Map1<Op>{in, y.data<float>(), op});
  if (form) y.set_stored_form(form);
  return y;
}

// y = op(a, b) for float32 a and b of one shape on one device; stored in
// the form a and b share if they share one, else row-major.
template <class Op>
Tensor zip2(const Tensor& a, const Tensor& b, Op op, const char* name) {
  require_same_device(a, b, name);
  DDL_CHECK(a.shape() == b.shape(), "{}: operands of shapes {} and {} differ", name, a.shape(), b.shape());
  Tensor y = empty_float(a.shape(), a.device());
  const std::shared_ptr<const MemoryForm> form = a.stored_form(), b_form = b.stored_form();
  const bool shared = form && b_form && form->same_as(*b_form);
  const auto in = [shared](const Tensor& t) {
    return shared ? static_cast<const float*>(t.stored_data()) : t.data<float>();
  };
  backend::launch(a.device(), y.numel(), kernels::Zip2<Op>{in(a), in(b), y.data<float>(), op});
  if (shared) y.set_stored_form(form);
  return y;
}

// y = op(a, b) with a and b broadcast to a common shape.
template <class Op>
Tensor map2(const Tensor& a, const Tensor& b, Op op, const char* name) {
  require_float(a, name);
  require_float(b, name);
  require_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  if (a.shape() == shape && b.shape() == shape) return zip2(a, b, op, name);
  Tensor y = empty_float(shape, a.device());
  backend::launch(a.device(), y.numel(),
                  kernels::Map2<Op>{a.data<float>(), b.data<float>(), y.data<float>(),
                                    kernels::BroadcastIndex::make(a.shape(), shape),
                                    kernels::BroadcastIndex::make(b.shape(), shape), op});
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
