// Dense (fully connected): y = x W + b with W of shape [in, out] (Keras'
// layout; the GEMM runs on Eigen or cuBLAS through core's matmul).
#pragma once

#include <cstdint>

#include <ddl/core/random.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

// x: [..., in], weight: [in, out], bias: [out] or undefined.
Tensor dense(const Tensor& input, const Tensor& weight, const Tensor& bias);

class Dense : public Module {
 public:
  // Glorot-uniform weights and zero bias, as Keras.
  Dense(std::int64_t in_features, std::int64_t out_features, bool bias = true, Generator* generator = nullptr);

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dense"; }
  std::string describe() const override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  std::int64_t in_features_, out_features_;
  Tensor weight_, bias_;
};

}  // namespace ddl::layers
