// The differentiable operations on tensors, and tensor creation. Every op
// checks its inputs (dtype, devices, shapes) and throws ddl::Error naming
// itself and what was wrong. Binary ops broadcast NumPy-style.
#pragma once

#include <cstdint>
#include <vector>

#include <ddl/core/random.hpp>
#include <ddl/core/tensor.hpp>

namespace ddl {

// Creation.
// Uninitialised float32 memory not requiring grad: an op's result, before
// its kernel writes every element.
inline Tensor empty_float(const Shape& shape, const Device& device) {
  return Tensor::empty(shape, {DType::Float32, device, false});
}
Tensor zeros(const Shape& shape, const TensorOptions& options = {});
Tensor ones(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, double value, const TensorOptions& options = {});
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
// 0, 1, ..., n-1 as a 1-D tensor (float32 unless options say otherwise).
Tensor arange(std::int64_t n, const TensorOptions& options = {});
Tensor from_vector(const std::vector<float>& values, const Shape& shape, const TensorOptions& options = {});
// from_vector({1.0f, 2.0f}, {2}): a braced list of floats picks float32.
Tensor from_vector(std::initializer_list<float> values, const Shape& shape, const TensorOptions& options = {});
Tensor from_vector(const std::vector<std::int32_t>& values, const Shape& shape, const TensorOptions& options = {});
Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape, const TensorOptions& options = {});
// Random float32 tensors from a Philox stream: `generator`, or the default one.
Tensor uniform(const Shape& shape, float low = 0.0f, float high = 1.0f, const TensorOptions& options = {},
               Generator* generator = nullptr);
Tensor normal(const Shape& shape, float mean = 0.0f, float stddev = 1.0f, const TensorOptions& options = {},
              Generator* generator = nullptr);

// Elementwise arithmetic with broadcasting.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, float b);
Tensor mul(const Tensor& a, float b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, float exponent);
Tensor relu(const Tensor& x);
// relu's backward on its own: `grad` where relu's output `output` is
// positive, else 0; for ops that run a ReLU inside their own kernels
// (conv2d_relu). Records nothing.
Tensor relu_backward(const Tensor& output, const Tensor& grad);
Tensor abs(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, float b);
Tensor operator-(const Tensor& a, float b);
Tensor operator*(const Tensor& a, float b);
Tensor operator/(const Tensor& a, float b);
Tensor operator*(float a, const Tensor& b);
Tensor operator-(const Tensor& x);

// Reductions.
Tensor sum(const Tensor& x);  // all elements, a 0-d tensor
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);
struct MaxResult {
  Tensor values;   // float32, differentiable (gradient goes to the arg max)
  Tensor indices;  // int64
};
MaxResult max(const Tensor& x, int dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int dim, bool keepdim = false);
// Sums a broadcast result back to `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);
// Copies x broadcast to `shape`.
Tensor expand(const Tensor& x, const Shape& shape);

// Linear algebra. matmul: [.., m, k] @ [.., k, n] with equal batch dims, or
// either side 2-D (shared across the other's batch).
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor transpose(const Tensor& x);  // swaps the last two dims (a copy)

Tensor softmax(const Tensor& x, int dim = -1);
Tensor log_softmax(const Tensor& x, int dim = -1);

// Joining and cutting along a dim (0 by default; negative counts from the
// last). Along dim 0 any dtype; along another float32 only.
Tensor concat(const std::vector<Tensor>& tensors, int dim = 0);
Tensor slice(const Tensor& x, std::int64_t start, std::int64_t end, int dim = 0);

}  // namespace ddl
