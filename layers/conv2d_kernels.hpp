// The kernels behind conv2d (conv2d.cpp dispatches to conv2d_cpu.cpp and
// conv2d_cuda.cpp) and the geometry they share. Internal: not installed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/tensor.hpp>

namespace ddl::layers {

// The extents of one convolution, the contract between conv2d()
// (which checks them) and the backend kernels below.
struct Conv2dGeometry {
  std::int64_t batch = 0;     // N
  std::int64_t channels = 0;  // C, input channels
  std::int64_t height = 0;    // H
  std::int64_t width = 0;     // W
  std::int64_t filters = 0;   // K, output channels
  std::int64_t kernel_h = 0;  // kh
  std::int64_t kernel_w = 0;  // kw
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;
  std::int64_t out_height = 0;  // OH
  std::int64_t out_width = 0;   // OW

  std::int64_t input_image_size() const { return channels * height * width; }  // C H W
  std::int64_t output_image_size() const { return filters * out_pixels(); }    // K OH OW
  std::int64_t out_pixels() const { return out_height * out_width; }           // OH OW
  std::int64_t patch_size() const { return channels * kernel_h * kernel_w; }   // C kh kw, GEMM depth
  std::int64_t weight_size() const { return filters * patch_size(); }
  // 2 N K C kh kw OH OW: the multiply-adds of the forward pass, counted twice.
  double forward_flops() const { return 2.0 * static_cast<double>(batch) * filters * patch_size() * out_pixels(); }
};

// The backward pass's operands. The gradients wanted are those whose
// pointer is set; input is needed for grad_weight and grad_bias, weight for
// grad_input.
struct Conv2dBackward {
  const float* input = nullptr;
  const float* weight = nullptr;
  const float* grad_output = nullptr;
  float* grad_input = nullptr;
  float* grad_weight = nullptr;
  float* grad_bias = nullptr;
};

}  // namespace ddl::layers

// The kernels, one set per backend. Pointers are memory of the tensors'
// device; the gradients are overwritten, not added to.
namespace ddl::cpu_backend {
using layers::Conv2dBackward;
using layers::Conv2dGeometry;
// The CPU kernels take the activations and their gradients as tensors:
// oneDNN's read them in the layout they are stored in and leave their
// results in their own (core/memory_form.hpp), ddl's read and write NCHW.
// output = conv(input, weight) + bias; bias may be null. With `relu`,
// output = relu(that) where the kernel can apply it to each sum before
// storing it (ddl's Winograd kernels; oneDNN's, as max(sum, 0), for a
// finite weight and bias); returns whether it did, else the caller
// applies the ReLU.
bool conv2d_forward(const Conv2dGeometry& g, const Tensor& input, const float* weight, const float* bias,
                    const Tensor& output, bool relu = false);
// The gradients wanted are the defined ones, as in Conv2dBackward.
struct Conv2dBackwardTensors {
  Tensor input, grad_output, grad_input;
  const float* weight = nullptr;
  float* grad_weight = nullptr;
  float* grad_bias = nullptr;
};
void conv2d_backward(const Conv2dGeometry& g, const Conv2dBackwardTensors& operands);
// grad_bias[k] = the sum of the output's gradient over images and pixels,
// for the kernels that leave the bias's gradient to it. The gradient is
// NCHW (block 0) or in oneDNN's channel blocks of 8 or 16
// (core/cpu/onednn.hpp, channel_blocked), and the sums are the same bits
// in each.
void conv2d_bias_gradient(const Conv2dGeometry& g, const float* grad_output, int block, float* grad_bias);
// The bytes of the staging buffers (core/cpu/onednn.hpp) conv2d_forward
// uses for g: each slot's buffer, one per thread, grows to the largest use
// and is kept, outside the allocator's count.
struct Conv2dStaging {
  struct Slots {
    std::size_t input = 0, weights = 0, output = 0, scratchpad = 0;
    std::size_t strip = 0;     // ddl's Winograd kernels' rows of an image for a row of tiles
    std::size_t products = 0;  // the GEMM's operands copied with longer rows (ProductA and ProductB)

    // Each slot's buffer grows to its largest use: the larger of each.
    void keep_largest(const Slots& other) {
      input = std::max(input, other.input);
      weights = std::max(weights, other.weights);
      output = std::max(output, other.output);
      scratchpad = std::max(scratchpad, other.scratchpad);
      strip = std::max(strip, other.strip);
      products = std::max(products, other.products);
    }
    std::size_t total() const {
      return input + weights + output + scratchpad + strip + products;
    }
  };
  Slots caller;             // the calling thread's
  Slots each_worker;        // each other thread's, where a kernel runs parts of the work on other threads
  std::size_t workers = 0;  // how many other threads hold them

  void keep_largest(const Conv2dStaging& other) {
    caller.keep_largest(other.caller);
    each_worker.keep_largest(other.each_worker);
    workers = std::max(workers, other.workers);
  }
  std::size_t total() const { return caller.total() + workers * each_worker.total(); }
};
Conv2dStaging conv2d_forward_staging(const Conv2dGeometry& g);
// The forward primitive oneDNN chose for g, e.g. "jit_wino_4x3:avx512_core".
std::string conv2d_implementation(const Conv2dGeometry& g);
}  // namespace ddl::cpu_backend

namespace ddl::cuda_backend {
using layers::Conv2dBackward;
using layers::Conv2dGeometry;
void conv2d_forward(Stream stream, const Conv2dGeometry& g, const float* input, const float* weight, const float* bias,
                    float* output);
void conv2d_backward(Stream stream, const Conv2dGeometry& g, const Conv2dBackward& operands);
}  // namespace ddl::cuda_backend
