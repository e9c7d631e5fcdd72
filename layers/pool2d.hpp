// 2-D max and average pooling over NCHW float32 tensors, their functional
// ops and modules. The CPU kernels are loops in pool2d_cpu.cpp, the CUDA
// ones cuDNN pooling in pool2d_cuda.cpp; pool2d.cpp checks the arguments,
// picks the backend and records the backward.
//
// Gaps (PyTorch has them, ddl does not yet): rectangular windows, and
// stride and padding per axis; dilation; max pooling's indices as an output
// (for max-unpooling); a divisor override. On CUDA, average pooling with
// both ceil_mode and count_include_pad is refused where ceil_mode adds a
// window (such a window always runs past the padding, and what cuDNN divides
// by there is not documented); count_include_pad = false works.
#pragma once

#include <cstdint>
#include <string>

#include <ddl/layers/module.hpp>

namespace ddl::layers {

struct Pool2dOptions {
  std::int64_t kernel_size = 2;  // square windows
  std::int64_t stride = 0;       // 0 means stride = kernel_size, as Keras and PyTorch
  std::int64_t padding = 0;      // on each side, at most kernel_size / 2
  // Round the output extent up rather than down, keeping a last window that
  // runs past the input (PyTorch's ceil_mode; see the extent below).
  bool ceil_mode = false;
  // Average pooling only (max pooling ignores it): divide by the window's
  // size counting padded positions (the default, PyTorch's too), or by the
  // input positions the window covers.
  bool count_include_pad = true;

  // The step between windows: stride, or kernel_size where stride is 0.
  std::int64_t window_stride() const { return stride == 0 ? kernel_size : stride; }
};

// Output extent, per axis: floor((in + 2 padding - kernel) / stride) + 1,
// or with ceil_mode the same rounded up, less one if the last window would
// then start in the right padding (PyTorch's rule: every window starts
// inside the input or its left padding, so none is wholly padding).
//
// The output extent along one axis of extent `in` by that formula, or 0 where
// no window fits (in + 2 padding < kernel_size). Tiled inference
// (parallel/planning/receptive_field.hpp) plans tiles with it.
std::int64_t pool2d_output_extent(std::int64_t in, const Pool2dOptions& options);

// max_pool2d: padded positions never win (they act as -infinity); a NaN in a
// window wins, so NaNs propagate. Backward sends each output's gradient to
// the position of its window's maximum, summing where windows overlap. On
// ties it is the first maximum in row-major order, on the CPU and on cuDNN's
// deterministic max mode alike (the conformance suite's tie cases).
Tensor max_pool2d(const Tensor& input, const Pool2dOptions& options = {});
// avg_pool2d: the window's sum of input values divided by
// * count_include_pad (the default): the window's size, padded positions
//   included, so outputs at the border are pulled towards 0; that is
//   kernel_size^2 except for a ceil_mode window that runs past the right or
//   bottom padding, whose positions beyond the padding are not counted
//   (PyTorch's rule);
// * otherwise: the number of input positions in the window (cuDNN's
//   CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING).
Tensor avg_pool2d(const Tensor& input, const Pool2dOptions& options = {});

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const Pool2dOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string describe() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const Pool2dOptions& options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string describe() const override;
  const Pool2dOptions& options() const { return options_; }

 private:
  Pool2dOptions options_;
};

}  // namespace ddl::layers
