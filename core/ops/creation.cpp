// Tensor creation: constants, ranges, host vectors and seeded random draws.
#include <ddl/core/ops/helpers.hpp>

namespace ddl {

using namespace ops_detail;

namespace {

template <class Kernel>
Tensor make_float(const Shape& shape, const TensorOptions& options, Kernel kernel) {
  Tensor result = Tensor::empty(shape, options.with_requires_grad(false));
  kernel.y = result.data<float>();
  backend::launch(result.device(), result.numel(), kernel);
  return result.set_requires_grad(options.requires_grad);
}

template <class T>
Tensor from_host(const std::vector<T>& values, const Shape& shape, const TensorOptions& options) {
  DDL_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(),
            "from_vector: {} values cannot fill shape {} ({} elements)", values.size(), shape, shape.numel());
  Tensor result = Tensor::empty(shape, options.with_dtype(dtype_of<T>()).with_requires_grad(false));
  backend::copy_bytes(result.device(), result.raw_data(), cpu(), values.data(), result.nbytes());
  return result.set_requires_grad(options.requires_grad);
}

Generator& pick(Generator* generator) { return generator != nullptr ? *generator : default_generator(); }

}  // namespace

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(std::uint64_t seed) { default_generator().set_state(seed, 0); }

Tensor zeros(const Shape& shape, const TensorOptions& options) {
  Tensor result = Tensor::empty(shape, options.with_requires_grad(false));
  backend::fill_zero(result.device(), result.raw_data(), result.nbytes());
  return result.set_requires_grad(options.requires_grad);
}

Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  Tensor result = Tensor::empty(shape, options.with_requires_grad(false));
  switch (options.dtype) {
    case DType::Float32:
      backend::launch(result.device(), result.numel(),
                      kernels::FillValue<float>{result.data<float>(), static_cast<float>(value)});
      break;
    case DType::Int32:
      backend::launch(result.device(), result.numel(),
                      kernels::FillValue<std::int32_t>{result.data<std::int32_t>(), static_cast<std::int32_t>(value)});
      break;
    case DType::Int64:
      backend::launch(result.device(), result.numel(),
                      kernels::FillValue<std::int64_t>{result.data<std::int64_t>(), static_cast<std::int64_t>(value)});
      break;
  }
  return result.set_requires_grad(options.requires_grad);
}

Tensor ones(const Shape& shape, const TensorOptions& options) { return full(shape, 1.0, options); }

Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), {like.dtype(), like.device(), false}); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), {like.dtype(), like.device(), false}); }

Tensor arange(std::int64_t n, const TensorOptions& options) {
  DDL_CHECK(n >= 0, "arange: count must be non-negative, got {}", n);
  Tensor result = Tensor::empty(Shape{n}, options.with_requires_grad(false));
  switch (options.dtype) {
    case DType::Float32:
      backend::launch(result.device(), n, kernels::Arange<float>{result.data<float>(), 0.0f, 1.0f});
      break;
    case DType::Int32:
      backend::launch(result.device(), n, kernels::Arange<std::int32_t>{result.data<std::int32_t>(), 0, 1});
      break;
    case DType::Int64:
      backend::launch(result.device(), n, kernels::Arange<std::int64_t>{result.data<std::int64_t>(), 0, 1});
      break;
  }
  return result.set_requires_grad(options.requires_grad);
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape, const TensorOptions& options) {
  return from_host(values, shape, options);
}
Tensor from_vector(std::initializer_list<float> values, const Shape& shape, const TensorOptions& options) {
  return from_host(std::vector<float>(values), shape, options);
}
Tensor from_vector(const std::vector<std::int32_t>& values, const Shape& shape, const TensorOptions& options) {
  return from_host(values, shape, options);
}
Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape, const TensorOptions& options) {
  return from_host(values, shape, options);
}

Tensor uniform(const Shape& shape, float low, float high, const TensorOptions& options, Generator* generator) {
  DDL_CHECK(options.dtype == DType::Float32, "uniform: only float32 is supported, got {}", options.dtype);
  DDL_CHECK(low <= high, "uniform: low {} is above high {}", low, high);
  Generator& g = pick(generator);
  const std::uint64_t offset = g.advance(static_cast<std::uint64_t>(shape.numel()));
  return make_float(shape, options, kernels::UniformFill{nullptr, g.seed(), offset, low, high});
}

Tensor normal(const Shape& shape, float mean, float stddev, const TensorOptions& options, Generator* generator) {
  DDL_CHECK(options.dtype == DType::Float32, "normal: only float32 is supported, got {}", options.dtype);
  DDL_CHECK(stddev >= 0.0f, "normal: stddev must be non-negative, got {}", stddev);
  Generator& g = pick(generator);
  const std::uint64_t offset = g.advance(static_cast<std::uint64_t>(shape.numel()));
  return make_float(shape, options, kernels::NormalFill{nullptr, g.seed(), offset, mean, stddev});
}

}  // namespace ddl
