// The kernels behind conv2d (conv2d.cpp dispatches to conv2d_cpu.cpp and
// conv2d_cuda.cpp) and the geometry they share. Internal: not installed.
#pragma once

#include <cstdint>

#include <ddl/core/cuda/runtime.hpp>

namespace ddl::layers {

// The extents of one convolution, the contract between conv2d()
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
void conv2d_forward(Stream stream, const Conv2dGeometry& g, const float* input, const float* weight, const float* bias,
                    float* output);
void conv2d_backward_data(Stream stream, const Conv2dGeometry& g, const float* grad_output, const float* weight,
                          float* grad_input);
void conv2d_backward_filter(Stream stream, const Conv2dGeometry& g, const float* input, const float* grad_output,
                            float* grad_weight);
void conv2d_backward_bias(Stream stream, const Conv2dGeometry& g, const float* grad_output, float* grad_bias);
}  // namespace ddl::cuda_backend
