// Conv2d on the CPU: im2col + Eigen GEMM, one image at a time, images spread
// over OpenMP threads (Chellapilla et al. 2006, "High performance
// convolutional neural networks for document processing"; Caffe's layout).
//
// One image's patches form col [C kh kw, OH OW] (row (c, i, j) holds input
// channel c shifted by kernel tap (i, j)), so with the weight viewed as
// W [K, C kh kw] and one image's output as Y [K, OH OW]:
//   forward          Y  = W col (+ bias down each row)
//   backward-data    dX = col2im(W^T dY)
//   backward-filter  dW = sum over images of dY col^T
//   backward-bias    db = sum over images and pixels of dY
// Per-image products stay in the cache: single-threaded Eigen runs the
// 32->64-channel layer's [64 x 288] x [288 x 576] at ~100 GFLOP/s here,
// against ~40-85 for one product over the whole batch or a square 1024 one.
// The images are spread over an OpenMP team, dynamically, so that on a busy
// machine a thread the OS has descheduled does not hold its share of the
// batch back; each thread has its own col buffer and runs Eigen
// single-threaded (Eigen does not spawn threads inside an active parallel
// region).
//
// Determinism: forward and backward-data compute each image alone, and the
// weight gradient is summed per fixed chunk of images, then over the chunks
// in order, so no result depends on which thread did what: every result is
// bitwise the same for any thread count.

// GCC 12 reports false -Wmaybe-uninitialized positives inside its own
// AVX-512 intrinsics when Eigen's GEMM is instantiated with -march=native
// (core/CMakeLists.txt silences the same for core/cpu/gemm_cpu.cpp). The
// pragma must precede the first include of the intrinsics headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <ddl/core/config.hpp>
#include <ddl/core/cpu/parallel_for.hpp>
#include <ddl/layers/conv2d_kernels.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <cstring>
#include <vector>

namespace ddl::cpu_backend {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<Matrix>;
using ConstMatrixMap = Eigen::Map<const Matrix>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;

// The weight gradient is summed over at most this many chunks of the batch,
// whatever the thread count: enough to keep a few threads busy, few enough
// that the partial sums stay small.
constexpr std::int64_t kWeightGradChunks = 16;

// Below this many multiply-adds a pass runs on the calling thread: waking a
// team costs more than the work, and on a busy machine every parallel region
// can wait for a descheduled thread. It is also Eigen's own threshold for
// splitting one product (2 x its 50,000 minimum task), so the serial path,
// whose per-image products are smaller still, runs Eigen single-threaded too.
constexpr double kMinParallelWork = 1e5;

// The team a pass over the batch runs on. Large passes use every configured
// thread, even when there are fewer images than threads: inside a team of
// two or more Eigen's products stay single-threaded, so no product's
// rounding depends on how Eigen would have split it among threads.
int team_size(const Conv2dGeometry& g) {
  return g.forward_flops() / 2 < kMinParallelWork ? 1 : config::num_threads();
}

// A per-thread scratch buffer, kept between calls so a training step does not
// allocate its im2col buffers again on every convolution.
float* scratch(std::size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// The output positions o in [0, out_extent) whose input position
// o * stride + offset lies in [0, in_extent): [begin, end).
struct Span {
  std::int64_t begin, end;
};
Span inside(std::int64_t offset, std::int64_t stride, std::int64_t in_extent, std::int64_t out_extent) {
  // o >= ceil(-offset / stride) and o <= floor((in_extent - 1 - offset) / stride).
  const std::int64_t begin = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const std::int64_t last = in_extent - 1 - offset;
  const std::int64_t end = last < 0 ? 0 : last / stride + 1;
  const std::int64_t b = std::min(begin, out_extent), e = std::min(end, out_extent);
  return {b, std::max(b, e)};
}

// A 1x1 kernel with stride 1 and no padding reads the image itself: col = X.
bool col_is_input(const Conv2dGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride == 1 && g.padding == 0;
}

// col [C kh kw, OH OW] of one image x [C, H, W]; zeros where the kernel
// overlaps the padding.
void im2col(const Conv2dGeometry& g, const float* x, float* col) {
  const std::int64_t ow_count = g.out_width, pixels = g.out_pixels();
  for (std::int64_t c = 0; c < g.channels; ++c) {
    const float* plane = x + c * g.height * g.width;
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      const std::int64_t row_offset = i * g.dilation - g.padding;
      const Span rows = inside(row_offset, g.stride, g.height, g.out_height);
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        const std::int64_t col_offset = j * g.dilation - g.padding;
        const Span cols = inside(col_offset, g.stride, g.width, ow_count);
        float* out = col + ((c * g.kernel_h + i) * g.kernel_w + j) * pixels;
        std::fill(out, out + rows.begin * ow_count, 0.0f);
        for (std::int64_t oh = rows.begin; oh < rows.end; ++oh) {
          float* out_row = out + oh * ow_count;
          const float* in_row = plane + (oh * g.stride + row_offset) * g.width;
          std::fill(out_row, out_row + cols.begin, 0.0f);
          if (g.stride != 1) {
            for (std::int64_t ow = cols.begin; ow < cols.end; ++ow) out_row[ow] = in_row[ow * g.stride + col_offset];
          } else if (cols.end > cols.begin) {  // (an empty image has no data pointer to copy from)
            std::memcpy(out_row + cols.begin, in_row + cols.begin + col_offset,
                        sizeof(float) * static_cast<std::size_t>(cols.end - cols.begin));
          }
          std::fill(out_row + cols.end, out_row + ow_count, 0.0f);
        }
        std::fill(out + rows.end * ow_count, out + pixels, 0.0f);
      }
    }
  }
}

// The adjoint of im2col: x [C, H, W] = the sum of each col entry into the
// input position it was read from (padding entries are dropped).
void col2im(const Conv2dGeometry& g, const float* col, float* x) {
  const std::int64_t ow_count = g.out_width, pixels = g.out_pixels();
  std::fill(x, x + g.input_image_size(), 0.0f);
  for (std::int64_t c = 0; c < g.channels; ++c) {
    float* plane = x + c * g.height * g.width;
    for (std::int64_t i = 0; i < g.kernel_h; ++i) {
      const std::int64_t row_offset = i * g.dilation - g.padding;
      const Span rows = inside(row_offset, g.stride, g.height, g.out_height);
      for (std::int64_t j = 0; j < g.kernel_w; ++j) {
        const std::int64_t col_offset = j * g.dilation - g.padding;
        const Span cols = inside(col_offset, g.stride, g.width, ow_count);
        const float* in = col + ((c * g.kernel_h + i) * g.kernel_w + j) * pixels;
        for (std::int64_t oh = rows.begin; oh < rows.end; ++oh) {
          const float* in_row = in + oh * ow_count;
          float* out_row = plane + (oh * g.stride + row_offset) * g.width;
          if (g.stride == 1) {  // contiguous: vectorises
            for (std::int64_t ow = cols.begin; ow < cols.end; ++ow) out_row[ow + col_offset] += in_row[ow];
          } else {
            for (std::int64_t ow = cols.begin; ow < cols.end; ++ow) out_row[ow * g.stride + col_offset] += in_row[ow];
          }
        }
      }
    }
  }
}

// col of image n: the image itself, or its im2col in this thread's buffer.
const float* patches_of(const Conv2dGeometry& g, const float* input, std::int64_t n) {
  const float* x = input + n * g.input_image_size();
  if (col_is_input(g)) return x;
  float* col = scratch(static_cast<std::size_t>(g.patch_size() * g.out_pixels()));
  im2col(g, x, col);
  return col;
}

}  // namespace

void conv2d_forward(const Conv2dGeometry& g, const float* input, const float* weight, const float* bias,
                    float* output) {
  const ConstMatrixMap w(weight, g.filters, g.patch_size());
#pragma omp parallel for schedule(dynamic) num_threads(team_size(g))
  for (std::int64_t n = 0; n < g.batch; ++n) {
    const ConstMatrixMap col(patches_of(g, input, n), g.patch_size(), g.out_pixels());
    MatrixMap y(output + n * g.output_image_size(), g.filters, g.out_pixels());
    if (bias != nullptr) {
      // Eigen's product accumulates into its destination anyway, so starting
      // from the bias costs nothing over starting from zero.
      y.colwise() = ConstVectorMap(bias, g.filters);
      y.noalias() += w * col;
    } else {
      y.noalias() = w * col;
    }
  }
}

void conv2d_backward_data(const Conv2dGeometry& g, const float* grad_output, const float* weight,
                          float* grad_input) {
  const ConstMatrixMap w(weight, g.filters, g.patch_size());
#pragma omp parallel for schedule(dynamic) num_threads(team_size(g))
  for (std::int64_t n = 0; n < g.batch; ++n) {
    const ConstMatrixMap dy(grad_output + n * g.output_image_size(), g.filters, g.out_pixels());
    float* dx = grad_input + n * g.input_image_size();
    if (col_is_input(g)) {
      MatrixMap(dx, g.channels, g.out_pixels()).noalias() = w.transpose() * dy;
    } else {
      float* dcol = scratch(static_cast<std::size_t>(g.patch_size() * g.out_pixels()));
      MatrixMap(dcol, g.patch_size(), g.out_pixels()).noalias() = w.transpose() * dy;
      col2im(g, dcol, dx);
    }
  }
}

void conv2d_backward_filter(const Conv2dGeometry& g, const float* input, const float* grad_output,
                            float* grad_weight) {
  const std::int64_t chunks = std::min(g.batch, kWeightGradChunks), size = g.weight_size();
  MatrixMap dw(grad_weight, g.filters, g.patch_size());
  if (chunks == 0) {
    dw.setZero();
    return;
  }
  // Chunk 0 sums straight into grad_weight, the others into partial sums
  // owned by the calling thread.
  thread_local std::vector<float> partials;
  partials.resize(static_cast<std::size_t>((chunks - 1) * size));
  float* const partial_sums = partials.data();  // the calling thread's, shared with the team
#pragma omp parallel for schedule(dynamic) num_threads(team_size(g))
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    MatrixMap sum(chunk == 0 ? grad_weight : partial_sums + (chunk - 1) * size, g.filters, g.patch_size());
    const std::int64_t first = chunk * g.batch / chunks, last = (chunk + 1) * g.batch / chunks;
    for (std::int64_t n = first; n < last; ++n) {
      const ConstMatrixMap col(patches_of(g, input, n), g.patch_size(), g.out_pixels());
      const ConstMatrixMap dy(grad_output + n * g.output_image_size(), g.filters, g.out_pixels());
      if (n == first) {
        sum.noalias() = dy * col.transpose();
      } else {
        sum.noalias() += dy * col.transpose();
      }
    }
  }
  for (std::int64_t chunk = 1; chunk < chunks; ++chunk) {
    dw += ConstMatrixMap(partial_sums + (chunk - 1) * size, g.filters, g.patch_size());
  }
}

void conv2d_backward_bias(const Conv2dGeometry& g, const float* grad_output, float* grad_bias) {
  // Each filter's sum is one thread's, image by image in order, in double
  // across images so a large batch does not lose the small terms.
  const bool small = g.batch * g.output_image_size() < kParallelGrain;
#pragma omp parallel for schedule(static) num_threads(small ? 1 : config::num_threads())
  for (std::int64_t k = 0; k < g.filters; ++k) {
    double total = 0.0;
    for (std::int64_t n = 0; n < g.batch; ++n) {
      total += ConstVectorMap(grad_output + n * g.output_image_size() + k * g.out_pixels(), g.out_pixels()).sum();
    }
    grad_bias[k] = static_cast<float>(total);
  }
}

}  // namespace ddl::cpu_backend
