// concat and slice along dim 0. Rows of a contiguous tensor are contiguous,
// so both are plain copies of byte ranges, and each is the other's backward.
#include <ddl/core/ops/helpers.hpp>

namespace ddl {

using namespace ops_detail;

Tensor concat(const std::vector<Tensor>& tensors) {
  DDL_CHECK(!tensors.empty(), "concat: no tensors given");
  const Tensor& first = tensors.front();
  DDL_CHECK(first.defined() && first.dim() >= 1, "concat: tensors need at least 1 dim");
  std::vector<std::int64_t> dims = first.shape().to_vector();
  std::int64_t rows = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    DDL_CHECK(t.defined(), "concat: tensor {} is undefined", i);
    DDL_CHECK(t.dtype() == first.dtype(), "concat: tensor {} is {}, tensor 0 is {}", i, t.dtype(), first.dtype());
    require_same_device(first, t, "concat");
    std::vector<std::int64_t> rest = t.shape().to_vector();
    DDL_CHECK(t.dim() == first.dim() && std::equal(rest.begin() + 1, rest.end(), dims.begin() + 1),
              "concat: tensor {} has shape {}, which differs from tensor 0's {} beyond dim 0", i, t.shape(),
              first.shape());
    rows += t.size(0);
  }
  dims[0] = rows;
  Tensor result = Tensor::empty(Shape(dims), {first.dtype(), first.device(), false});
  auto* out = static_cast<char*>(result.raw_data());
  for (const Tensor& t : tensors) {
    backend::copy_bytes(t.device(), out, t.device(), t.raw_data(), t.nbytes());
    out += t.nbytes();
  }
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : tensors) inputs.push_back(&t);
  if (autograd::needs_grad(inputs)) {
    std::vector<std::int64_t> row_counts;
    for (const Tensor& t : tensors) row_counts.push_back(t.size(0));
    autograd::record("ConcatBackward", inputs, result, [row_counts](const Tensor& g) {
      std::vector<Tensor> grads;
      std::int64_t start = 0;
      for (const std::int64_t count : row_counts) {
        grads.push_back(slice(g, start, start + count));
        start += count;
      }
      return grads;
    });
  }
  return result;
}

Tensor slice(const Tensor& x, std::int64_t start, std::int64_t end) {
  DDL_CHECK(x.defined() && x.dim() >= 1, "slice: needs a tensor with at least 1 dim");
  DDL_CHECK(0 <= start && start <= end && end <= x.size(0),
            "slice: rows [{}, {}) are out of range for shape {}", start, end, x.shape());
  std::vector<std::int64_t> dims = x.shape().to_vector();
  dims[0] = end - start;
  Tensor result = Tensor::empty(Shape(dims), {x.dtype(), x.device(), false});
  const std::size_t row_bytes = x.size(0) == 0 ? 0 : x.nbytes() / static_cast<std::size_t>(x.size(0));
  backend::copy_bytes(x.device(), result.raw_data(), x.device(),
                      static_cast<const char*>(x.raw_data()) + static_cast<std::size_t>(start) * row_bytes,
                      result.nbytes());
  if (autograd::needs_grad({&x})) {
    autograd::record("SliceBackward", {&x}, result, [shape = x.shape(), start, end](const Tensor& g) {
      std::vector<std::int64_t> before = shape.to_vector(), after = shape.to_vector();
      before[0] = start;
      after[0] = shape[0] - end;
      const TensorOptions options{DType::Float32, g.device(), false};
      return std::vector{concat({zeros(Shape(before), options), g, zeros(Shape(after), options)})};
    });
  }
  return result;
}

}  // namespace ddl
