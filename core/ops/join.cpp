// concat and slice along a dim. A row-major tensor viewed as the matrix
// [outer, size(dim) * inner] (outer: the product of the dims before `dim`,
// inner: of those after it) has its part along `dim` as a block of
// columns: along dim 0 (outer = 1) one byte range, copied as bytes for any
// dtype; along a later dim one block per row, copied by the CopyColumns
// kernel. Each op is the other's backward.
#include <ddl/core/ops/helpers.hpp>

namespace ddl {

using namespace ops_detail;

namespace {

// The product of the dims before `dim`.
std::int64_t outer_size(const Shape& shape, int dim) {
  std::int64_t outer = 1;
  for (int d = 0; d < dim; ++d) outer *= shape[d];
  return outer;
}

// `width` values per row of `rows`, from column x_column of x's matrix to
// column y_column of y's (each seen as [rows, numel / rows]).
void copy_columns(const Tensor& x, std::int64_t x_column, const Tensor& y, std::int64_t y_column, std::int64_t rows,
                  std::int64_t width, const char* op) {
  if (rows == 0 || width == 0) return;
  const std::int64_t x_cols = x.numel() / rows, y_cols = y.numel() / rows;
  if (rows == 1) {
    const std::size_t size = element_size(x.dtype());
    backend::copy_bytes(y.device(), static_cast<char*>(y.raw_data()) + static_cast<std::size_t>(y_column) * size,
                        x.device(), static_cast<const char*>(x.raw_data()) + static_cast<std::size_t>(x_column) * size,
                        static_cast<std::size_t>(width) * size);
    return;
  }
  DDL_CHECK(x.dtype() == DType::Float32, "{}: along a dim other than 0 only float32 is supported, got {}", op,
            x.dtype());
  backend::launch(x.device(), rows * width,
                  kernels::CopyColumns{x.data<float>(), y.data<float>(), width, x_cols, x_column, y_cols, y_column});
}

}  // namespace

Tensor concat(const std::vector<Tensor>& tensors, int dim) {
  DDL_CHECK(!tensors.empty(), "concat: no tensors given");
  const Tensor& first = tensors.front();
  DDL_CHECK(first.defined() && first.dim() >= 1, "concat: tensors need at least 1 dim");
  dim = first.shape().normalize_dim(dim, "concat");
  std::vector<std::int64_t> dims = first.shape().to_vector();
  std::int64_t joined = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    DDL_CHECK(t.defined(), "concat: tensor {} is undefined", i);
    DDL_CHECK(t.dtype() == first.dtype(), "concat: tensor {} is {}, tensor 0 is {}", i, t.dtype(), first.dtype());
    require_same_device(first, t, "concat");
    bool same_elsewhere = t.dim() == first.dim();
    for (int d = 0; same_elsewhere && d < t.dim(); ++d) same_elsewhere = d == dim || t.size(d) == first.size(d);
    DDL_CHECK(same_elsewhere, "concat: tensor {} has shape {}, which differs from tensor 0's {} beyond dim {}", i,
              t.shape(), first.shape(), dim);
    joined += t.size(dim);
  }
  dims[static_cast<std::size_t>(dim)] = joined;
  Tensor result = Tensor::empty(Shape(dims), {first.dtype(), first.device(), false});
  const std::int64_t rows = outer_size(first.shape(), dim);
  std::int64_t column = 0;
  for (const Tensor& t : tensors) {
    const std::int64_t width = rows == 0 ? 0 : t.numel() / rows;
    copy_columns(t, 0, result, column, rows, width, "concat");
    column += width;
  }
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : tensors) inputs.push_back(&t);
  if (autograd::needs_grad(inputs)) {
    std::vector<std::int64_t> sizes;
    for (const Tensor& t : tensors) sizes.push_back(t.size(dim));
    autograd::record("ConcatBackward", inputs, result, [sizes, dim](const Tensor& g) {
      std::vector<Tensor> grads;
      std::int64_t start = 0;
      for (const std::int64_t size : sizes) {
        grads.push_back(slice(g, start, start + size, dim));
        start += size;
      }
      return grads;
    });
  }
  return result;
}

Tensor slice(const Tensor& x, std::int64_t start, std::int64_t end, int dim) {
  DDL_CHECK(x.defined() && x.dim() >= 1, "slice: needs a tensor with at least 1 dim");
  dim = x.shape().normalize_dim(dim, "slice");
  DDL_CHECK(0 <= start && start <= end && end <= x.size(dim), "slice: [{}, {}) is out of range for dim {} of shape {}",
            start, end, dim, x.shape());
  std::vector<std::int64_t> dims = x.shape().to_vector();
  dims[static_cast<std::size_t>(dim)] = end - start;
  Tensor result = Tensor::empty(Shape(dims), {x.dtype(), x.device(), false});
  const std::int64_t rows = outer_size(x.shape(), dim);
  const std::int64_t inner = x.size(dim) == 0 || rows == 0 ? 0 : x.numel() / rows / x.size(dim);
  copy_columns(x, start * inner, result, 0, rows, (end - start) * inner, "slice");
  if (autograd::needs_grad({&x})) {
    autograd::record("SliceBackward", {&x}, result, [shape = x.shape(), start, end, dim](const Tensor& g) {
      std::vector<std::int64_t> before = shape.to_vector(), after = shape.to_vector();
      before[static_cast<std::size_t>(dim)] = start;
      after[static_cast<std::size_t>(dim)] = shape[dim] - end;
      const TensorOptions options{DType::Float32, g.device(), false};
      return std::vector{concat({zeros(Shape(before), options), g, zeros(Shape(after), options)}, dim)};
    });
  }
  return result;
}

}  // namespace ddl
