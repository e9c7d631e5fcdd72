// The index kernels behind upsample_nearest2d (one body for CPU and GPU;
// listed in layer_kernels.hpp). Internal: not installed.
#pragma once

#include <cstdint>

#include <ddl/core/macros.hpp>

namespace ddl::kernels {

// Forward, one index per output element: a gather,
// out[p, i, j] = in[p, i / scale, j / scale] over the N*C planes p of an
// input of height x width.
struct Upsample2dForward {
  const float* in;
  float* out;
  std::int64_t height, width, scale;
  DDL_HOST_DEVICE void operator()(std::int64_t o) const {
    const std::int64_t out_width = width * scale, out_height = height * scale;
    const std::int64_t j = o % out_width, i = (o / out_width) % out_height, plane = o / (out_width * out_height);
    out[o] = in[(plane * height + i / scale) * width + j / scale];
  }
};

// Backward, one index per input element: the sum of its scale x scale block
// of grad, row by row. Each block belongs to one index, so no atomics are
// needed and the fixed order makes the sum the same on every device.
struct Upsample2dBackward {
  const float* grad;
  float* grad_in;
  std::int64_t height, width, scale;
  DDL_HOST_DEVICE void operator()(std::int64_t k) const {
    const std::int64_t x = k % width, y = (k / width) % height, plane = k / (width * height);
    const std::int64_t out_width = width * scale;
    const float* row = grad + (plane * height * scale + y * scale) * out_width + x * scale;
    float sum = 0.0f;
    for (std::int64_t a = 0; a < scale; ++a, row += out_width) {
      for (std::int64_t b = 0; b < scale; ++b) sum += row[b];
    }
    grad_in[k] = sum;
  }
};

}  // namespace ddl::kernels
