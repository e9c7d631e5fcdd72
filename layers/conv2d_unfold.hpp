// The weight's gradient of a convolution with few input channels by
// unfolding its input (conv2d_unfold_cpu.cpp), which conv2d_cpu.cpp runs
// in oneDNN's place there. Internal: not installed.
#pragma once

#include <ddl/layers/conv2d_kernels.hpp>

namespace ddl::cpu_backend::unfolded {

// Whether g has few enough input channels for backward_weights to beat
// oneDNN, whose kernels pad the channels to a block of 8 or 16.
bool suits(const layers::Conv2dGeometry& g);

// dw and dbias (either may be null) from the input x and the output's
// gradient dy. Tensors are NCHW / OIHW, but dy may be in oneDNN's channel
// blocks of dy_block = 8 or 16 channels (0: NCHW), as a convolution's
// backward-data leaves it, read so without a reorder.
void backward_weights(const layers::Conv2dGeometry& g, const float* x, const float* dy, int dy_block, float* dw,
                      float* dbias);

}  // namespace ddl::cpu_backend::unfolded
