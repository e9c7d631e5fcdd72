// ddl's own Winograd F(4x4, 3x3) convolution on the CPU (conv2d_winograd_cpu.cpp
// explains it), which conv2d_cpu.cpp runs where oneDNN has no Winograd
// kernel. Internal: not installed.
#pragma once

#include <ddl/layers/conv2d_kernels.hpp>

namespace ddl::cpu_backend::winograd {

// Whether g is a convolution these kernels compute: 3x3, stride 1, no
// dilation, padding at most 2.
bool applies(const layers::Conv2dGeometry& g);
// Whether they beat oneDNN's direct kernel for g, as measured on AVX2:
// from 32 channels in and out and 16x16 outputs. The MNIST CNN's 32->64
// layer at 24x24 ran 1.3-1.7x faster; resnet_small's layers (16 to 64
// channels at 28x28 down to 7x7, where Winograd's transforms weigh more
// beside the products and tiles overhang the edges) trained slower, 441-502
// samples/s against direct's 513-561 (docs/PERFORMANCE.md).
bool pays_off(const layers::Conv2dGeometry& g);

// y = conv(x, w) + bias (bias may be null). Tensors are NCHW / OIHW.
void forward(const layers::Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y);
// The gradients `o` points to (any may be null): dx from w and dy, dw
// and dbias from x and dy, each chunk of dy taken through all of them at once.
void backward(const layers::Conv2dGeometry& g, const layers::Conv2dBackward& o);
// How many images forward() takes through at once.
std::int64_t images_per_chunk(const layers::Conv2dGeometry& g);
// The staging buffers forward() uses (conv2d_forward_staging).
Conv2dStaging forward_staging(const layers::Conv2dGeometry& g);

// The channels the transforms take at once, one vector: by default (0)
// 16 where the build targets AVX-512, else 8; 8 or 16 by number, so that
// the tests run both on any CPU. Anything else throws, leaving the width
// as it was. The results agree to float32's rounding, not always to the
// bit (a width the CPU lacks is emulated, and its multiply-adds fused
// differently).
void set_transform_lanes(int lanes);
// The width the transforms run at now.
int transform_lanes();

}  // namespace ddl::cpu_backend::winograd
