// Upsample2d: nearest-neighbour upsampling of NCHW float32 images by an
// integer factor, the decoder half of encoder-decoder segmenters (PyTorch's
// nn.Upsample(scale_factor=s, mode="nearest"), Keras' UpSampling2D). One
// index kernel body for CPU and GPU (upsample2d_kernels.hpp).
#pragma once

#include <cstdint>
#include <string>

#include <ddl/layers/module.hpp>

namespace ddl::layers {

// input [N, C, H, W] -> [N, C, H scale, W scale], each input pixel copied to
// a scale x scale block: out[n, c, i, j] = in[n, c, i / scale, j / scale].
// Backward sums each block's gradients into its pixel. scale >= 1.
Tensor upsample_nearest2d(const Tensor& input, std::int64_t scale);

class Upsample2d : public Module {
 public:
  explicit Upsample2d(std::int64_t scale = 2);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Upsample2d"; }
  std::string describe() const override;  // "Upsample2d(scale=2)"
  std::int64_t scale() const { return scale_; }

 private:
  std::int64_t scale_;
};

}  // namespace ddl::layers
