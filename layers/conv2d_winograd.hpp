// ddl's own Winograd F(4x4, 3x3) convolution on the CPU (conv2d_winograd_cpu.cpp
// explains it), which conv2d_cpu.cpp runs where oneDNN has no Winograd
// kernel. Internal: not installed.
#pragma once

#include <ddl/layers/conv2d_kernels.hpp>

namespace ddl::cpu_backend::winograd {

// Whether g is a convolution these kernels compute: 3x3, stride 1, no
// dilation, padding at most 2.
bool applies(const layers::Conv2dGeometry& g);
// Whether they beat oneDNN's direct kernel for g, as measured on AVX2 (a
// Zen 3, batch 128, forward + backward, 1 and 2 threads; docs/PERFORMANCE.md):
// outputs of at least 7x7, and 32 channels in and out, or 16 at 16x16 or
// more. 1.4-1.5x faster at 16->16 28x28 and 64->64 7x7, 1.03-1.10x at
// 32->32 14x14 and 7x7; 0.82-1.0x at 16->16 14x14, 0.97-1.06x at 8->8
// 28x28.
bool pays_off(const layers::Conv2dGeometry& g);

// y = conv(x, w) + bias (bias may be null), and with `relu` relu() of
// that (its very function: NaN stays NaN). Tensors are NCHW / OIHW.
void forward(const layers::Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y,
             bool relu = false);
// The gradients `o` points to (any may be null): dx from w and dy, dw
// and dbias from x and dy, each chunk of dy taken through dx and dw together.
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
