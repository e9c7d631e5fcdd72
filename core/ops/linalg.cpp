// Matrix products (2-D and batched) on the backend's GEMM, and transpose.
// Backward uses the transposed-operand flags of GEMM instead of materialising
// transposes: dA = dC @ B^T, dB = A^T @ dC.
#include <ddl/core/deferred_gradients.hpp>
#include <ddl/core/ops/helpers.hpp>

namespace ddl {

using namespace ops_detail;

namespace {

struct MatrixDims {
  std::int64_t rows, cols;  // after the optional transpose
};

MatrixDims dims_of(const Tensor& t, bool transposed) {
  const Shape& s = t.shape();
  const std::int64_t r = s[s.rank() - 2], c = s[s.rank() - 1];
  return transposed ? MatrixDims{c, r} : MatrixDims{r, c};
}

Shape batch_shape(const Shape& s) {
  std::vector<std::int64_t> dims = s.to_vector();
  dims.resize(dims.size() - 2);
  return Shape(dims);
}

// The GEMM of op(a) @ op(b), where op transposes the last two dims when
// asked, but for its output (args.c), and the result's shape. Batch dims
// must be equal, or one side 2-D and shared by every matrix of the other.
backend::GemmArgs gemm_args(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const char* name,
                            Shape& result) {
  require_float(a, name);
  require_float(b, name);
  require_same_device(a, b, name);
  DDL_CHECK(a.dim() >= 2 && b.dim() >= 2, "{}: both operands need at least 2 dims, got shapes {} and {}", name,
            a.shape(), b.shape());
  const MatrixDims da = dims_of(a, trans_a), db = dims_of(b, trans_b);
  DDL_CHECK(da.cols == db.rows, "{}: shapes {} and {} do not match (inner dims {} and {})", name, a.shape(),
            b.shape(), da.cols, db.rows);
  const Shape batch_a = batch_shape(a.shape()), batch_b = batch_shape(b.shape());
  DDL_CHECK(batch_a == batch_b || a.dim() == 2 || b.dim() == 2,
            "{}: batch dims of shapes {} and {} differ (they must be equal or one operand 2-D)", name, a.shape(),
            b.shape());
  const Shape& batch = a.dim() > 2 ? batch_a : batch_b;
  std::vector<std::int64_t> out_dims = batch.to_vector();
  out_dims.push_back(da.rows);
  out_dims.push_back(db.cols);
  result = Shape(out_dims);

  backend::GemmArgs args;
  args.trans_a = trans_a;
  args.trans_b = trans_b;
  args.m = da.rows;
  args.n = db.cols;
  args.k = da.cols;
  args.a = a.data<float>();
  args.b = b.data<float>();
  if (b.dim() == 2 && !trans_a) {
    args.m = batch_a.numel() * da.rows;  // stacked rows of a: one large GEMM
  } else {
    args.batch = batch.numel();
    args.stride_a = a.dim() > 2 ? da.rows * da.cols : 0;
    args.stride_b = b.dim() > 2 ? db.rows * db.cols : 0;
    args.stride_c = da.rows * db.cols;
  }
  return args;
}

}  // namespace

Tensor ops_detail::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const char* name) {
  Shape shape;
  backend::GemmArgs args = gemm_args(a, trans_a, b, trans_b, name, shape);
  Tensor c = empty_float(shape, a.device());
  args.c = c.data<float>();
  backend::gemm(a.device(), args);
  return c;
}

void ops_detail::gemm_accumulate(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                 const char* name) {
  Shape shape;
  backend::GemmArgs args = gemm_args(a, trans_a, b, trans_b, name, shape);
  require_float(c, name);
  require_same_device(c, a, name);
  DDL_CHECK(c.shape() == shape, "{}: a product of shape {} cannot be added into a tensor of shape {}", name, shape,
            c.shape());
  args.c = c.data<float>();
  args.beta = 1.0f;
  backend::gemm(a.device(), args);
}

void ops_detail::add_weight_gradient(const std::shared_ptr<TensorImpl>& weight, const Tensor& grad, const Tensor& x,
                                     const Tensor& gradient, const char* name) {
  gemm_accumulate(grad, x, true, gradient, false, name);
  autograd::run_grad_hooks(weight);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor c = gemm(a, false, b, false, "matmul");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record(
        "MatmulBackward", {&a, &b}, c,
        [a = a.detach(), b = b.detach(), need_a = a.requires_grad(), need_b = b.requires_grad(),
         weight = b.dim() == 2 && b.requires_grad() && !b.impl()->grad_fn ? std::weak_ptr(b.impl())
                                                                           : std::weak_ptr<TensorImpl>()](
            const Tensor& g, const BackwardPass& pass) {
          Tensor grad_a, grad_b;
          if (need_a) grad_a = sum_to(gemm(g, false, b, true, "matmul backward"), a.shape());
          if (need_b && b.dim() == 2) {
            // A shared 2-D operand (a weight): a's batch folded into rows, one
            // GEMM sums it, now or, in a pass that defers it
            // (deferred_gradients.hpp), once for several backward passes.
            // a's matrices stacked, as the forward GEMM stacks them (not
            // numel / k: k may be 0).
            const std::int64_t k = a.size(-1), rows = batch_shape(a.shape()).numel() * a.size(-2);
            const Tensor x = a.reshape({rows, k}), gradient = g.reshape({rows, g.size(-1)});
            const std::shared_ptr<TensorImpl> leaf = weight.lock();
            if (!leaf || pass.deferred == nullptr || !pass.deferred->keep(leaf, pass.part, x, gradient)) {
              if (const Tensor into = autograd::grad_to_add_into(leaf); into.defined()) {
                add_weight_gradient(leaf, into, x, gradient, "matmul backward");
              } else {
                grad_b = gemm(x, true, gradient, false, "matmul backward");
              }
            }
          } else if (need_b) {
            grad_b = sum_to(gemm(a, true, g, false, "matmul backward"), b.shape());
          }
          return std::vector{grad_a, grad_b};
        });
  }
  return c;
}

Tensor transpose(const Tensor& x) {
  require_float(x, "transpose");
  DDL_CHECK(x.dim() >= 2, "transpose: needs at least 2 dims, got shape {}", x.shape());
  std::vector<std::int64_t> dims = x.shape().to_vector();
  std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  Tensor y = empty_float(Shape(dims), x.device());
  backend::launch(x.device(), x.numel(),
                  kernels::TransposeLast2{x.data<float>(), y.data<float>(), x.size(-2), x.size(-1)});
  if (autograd::needs_grad({&x})) {
    autograd::record("TransposeBackward", {&x}, y, [](const Tensor& g) { return std::vector{transpose(g)}; });
  }
  return y;
}

}  // namespace ddl
