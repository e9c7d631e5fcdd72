// Conv2d: 2-D convolution (cross-correlation, as every framework) of NCHW
// float32 images with OIHW weights, cuDNN's layout. The functional op
// records one autograd node whose backward calls the backend's
// backward-data / backward-filter / backward-bias kernels directly:
// im2col + Eigen GEMM on CPU (conv2d_cpu.cpp), cuDNN on CUDA (conv2d_cuda.cpp).
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

class Conv2d : public Module {
 public:
  // weight [out_channels, in_channels, kernel height, kernel width]: OIHW,
  // PyTorch's layout too, so its Conv2d weights load unchanged. Glorot-uniform
  // weights and zero bias, as Keras.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Conv2dOptions options = {},
         Generator* generator = nullptr);

  Tensor forward(const Tensor& input) override;
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

// Internal: the extents of one convolution, the contract between conv2d()
// (which checks them) and the backend kernels below.
struct Conv2dGeometry {
  std::int64_t batch = 0;         // N
  std::int64_t channels = 0;      // C, input channels
  std::int64_t height = 0;        // H
  std::int64_t width = 0;         // W
  std::int64_t filters = 0;       // K, output channels
  std::int64_t kernel_h = 0;      // kh
  std::int64_t kernel_w = 0;      // kw
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;
  std::int64_t out_height = 0;    // OH
  std::int64_t out_width = 0;     // OW

  std::int64_t input_image_size() const { return channels * height * width; }  // C H W
  std::int64_t output_image_size() const { return filters * out_pixels(); }    // K OH OW
  std::int64_t out_pixels() const { return out_height * out_width; }           // OH OW
  std::int64_t patch_size() const { return channels * kernel_h * kernel_w; }   // C kh kw, GEMM depth
  std::int64_t weight_size() const { return filters * patch_size(); }
  // 2 N K C kh kw OH OW: the multiply-adds of the forward pass, counted twice.
  double forward_flops() const { return 2.0 * static_cast<double>(batch) * filters * patch_size() * out_pixels(); }
};

}  // namespace ddl::layers

// The kernels, one set per backend. Pointers are memory of the tensors'
// device; grad_input, grad_weight and grad_bias are overwritten, not added to.
namespace ddl::cpu_backend {
using layers::Conv2dGeometry;
// output = conv(input, weight) + bias; bias may be null.
void conv2d_forward(const Conv2dGeometry& g, const float* input, const float* weight, const float* bias, float* output);
void conv2d_backward_data(const Conv2dGeometry& g, const float* grad_output, const float* weight, float* grad_input);
void conv2d_backward_filter(const Conv2dGeometry& g, const float* input, const float* grad_output, float* grad_weight);
void conv2d_backward_bias(const Conv2dGeometry& g, const float* grad_output, float* grad_bias);
}  // namespace ddl::cpu_backend

namespace ddl::cuda_backend {
using layers::Conv2dGeometry;
void conv2d_forward(int device, const Conv2dGeometry& g, const float* input, const float* weight, const float* bias,
                    float* output);
void conv2d_backward_data(int device, const Conv2dGeometry& g, const float* grad_output, const float* weight,
                          float* grad_input);
void conv2d_backward_filter(int device, const Conv2dGeometry& g, const float* input, const float* grad_output,
                            float* grad_weight);
void conv2d_backward_bias(int device, const Conv2dGeometry& g, const float* grad_output, float* grad_bias);
}  // namespace ddl::cuda_backend
