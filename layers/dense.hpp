// Dense (fully connected): y = x W + b with W of shape [in, out], Keras's
// layout; the GEMM runs through core's matmul (on the CPU oneDNN's matmul
// in tiles, Eigen for small products; cuBLAS on CUDA).
//
// PyTorch's Linear stores the transpose, weight [out, in] with y = x W^T + b:
// a PyTorch weight must be transposed before it is loaded here (see
// Module::load_state_dict), and for a square layer nothing can detect a
// forgotten transpose, since both layouts have the same shape.
#pragma once

#include <cstdint>

#include <ddl/core/random.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

// x: [..., in], weight: [in, out] (not PyTorch's [out, in]), bias: [out] or
// undefined.
Tensor dense(const Tensor& input, const Tensor& weight, const Tensor& bias);

class Dense : public Module {
 public:
  // Glorot-uniform weights and zero bias, as Keras.
  Dense(std::int64_t in_features, std::int64_t out_features, bool bias = true, Generator* generator = nullptr);

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dense"; }
  std::string describe() const override;
  std::string parameter_layout(const std::string& name) const override;

  const Tensor& weight() const { return weight_; }  // [in, out]
  const Tensor& bias() const { return bias_; }

 private:
  std::int64_t in_features_, out_features_;
  Tensor weight_, bias_;
};

}  // namespace ddl::layers
