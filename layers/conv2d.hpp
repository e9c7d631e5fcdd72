// Conv2d: 2-D convolution (cross-correlation, as every framework) of NCHW
// float32 images with OIHW weights, cuDNN's layout. The functional op
// records one autograd node whose backward calls the backend's
// backward-data / backward-filter / backward-bias kernels directly: on the
// CPU oneDNN's convolutions or ddl's own Winograd kernel (conv2d_cpu.cpp,
// conv2d_winograd_cpu.cpp), on CUDA cuDNN (conv2d_cuda.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <ddl/core/random.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

// A kernel's extent, height by width. One integer means a square:
// `.kernel_size = 3` is 3x3, `.kernel_size = {1, 7}` is 1 row by 7 columns.
struct KernelSize {
  KernelSize(std::int64_t side) : height(side), width(side) {}  // implicit, so `= 3` reads as Keras's and PyTorch's
  KernelSize(std::int64_t height, std::int64_t width) : height(height), width(width) {}
  std::int64_t height, width;
};

// The kernel may be rectangular; stride, padding and dilation are the same
// along both axes (a gap: PyTorch and Keras take a pair for each; the kernels
// would need per-axis geometry). The functional conv2d() takes the kernel's
// extent from the weight's shape; kernel_size and bias are what the Conv2d
// layer creates its parameters with.
struct Conv2dOptions {
  KernelSize kernel_size = 3;
  std::int64_t stride = 1;
  std::int64_t padding = 0;   // zeros added on every side
  std::int64_t dilation = 1;  // spacing between kernel taps (1: dense)
  bool bias = true;
};

// input [N, C, H, W], weight [K, C, kh, kw], bias [K] or undefined; returns
// [N, K, OH, OW] with OH = (H + 2 padding - dilation (kh - 1) - 1) / stride + 1
// (and the same for OW). Differentiable with respect to all three.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options = {});

// relu(conv2d(input, weight, bias, options)) as one op: on the CPU the
// convolution's kernel applies the ReLU to each sum before storing it
// (oneDNN's as a post-op, ddl's Winograd kernels in their last step),
// which saves a pass over the output; on CUDA conv2d and then ReLU's
// function in place. Bit for bit relu(conv2d(...)) wherever the sum is a
// number; a NaN sum comes out 0 from oneDNN's (max(sum, 0), as in cuDNN's
// and TensorFlow's fused convolutions) and NaN from relu(). A weight or
// bias that is not all finite (a diverged model's) runs unfused there, so
// that its NaNs still reach the loss.
// Sequential runs a Conv2d followed by a ReLU through it
// (config::op_fusion()). oneDNN's reference kernels (CPUs oneDNN has no
// JIT kernel for) apply the ReLU as x > 0 ? x : 0 * x, -0 for a negative
// sum, where relu() gives +0: equal values, other bits.
Tensor conv2d_relu(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options = {});

// The output extent along one axis by that formula, for an input extent `in`
// and a kernel of `kernel` taps along it, or 0 where the dilated kernel does
// not fit the padded input. Tiled inference (parallel/planning/receptive_field.hpp)
// plans tiles with it.
std::int64_t conv2d_output_extent(std::int64_t in, std::int64_t kernel, const Conv2dOptions& options);

class Conv2d : public Module {
 public:
  // weight [out_channels, in_channels, kernel height, kernel width]: OIHW,
  // PyTorch's layout too, so its Conv2d weights load unchanged. Glorot-uniform
  // weights and zero bias, as Keras.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Conv2dOptions options = {},
         Generator* generator = nullptr);

  Tensor forward(const Tensor& input) override;
  // forward followed by a ReLU, as one op (conv2d_relu).
  Tensor forward_relu(const Tensor& input);
  std::string type_name() const override { return "Conv2d"; }
  std::string describe() const override;
  std::string parameter_layout(const std::string& name) const override;

  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }
  const Conv2dOptions& options() const { return options_; }

 private:
  std::int64_t in_channels_, out_channels_;
  Conv2dOptions options_;
  Tensor weight_, bias_;
};

}  // namespace ddl::layers
