// The weight's gradient of a convolution with few input channels, by
// unfolding (im2col; Chellapilla et al. 2006). oneDNN's kernels work on
// channels in blocks of 8 (AVX2) or 16 (AVX-512): for a first layer's one
// input channel its backward-weights kernel reads 8 or 16 times the input
// and, on AVX2, ran no faster on two threads than on one (10 ms for the
// Keras MNIST CNN's 1->32 layer, where this takes about 1).
//
// Each image's patches become the columns of a matrix, cols[c kh kw][o]
// for output pixel o, and its share of the gradient is one product,
// dW_n (K x C kh kw) = dY_n (K x OH OW) · cols_nᵀ (a product per block
// of channels where dY is in oneDNN's blocked layout). The images are dealt
// into a fixed number of groups (kGroups, whatever the thread count), each
// group's products summed image by image on one thread, and the groups'
// sums added in order: the same bits on any thread count.
#include <ddl/core/backend.hpp>
#include <ddl/core/cpu/onednn.hpp>
#include <ddl/layers/conv2d_unfold.hpp>

#include <algorithm>
#include <vector>

namespace ddl::cpu_backend::unfolded {
namespace {

// Below a block of 8 channels (AVX2's; AVX-512's is 16).
constexpr std::int64_t kFewChannels = 8;
constexpr std::int64_t kGroups = 16;

// cols[p][o] for one image: the input under tap p = (c, i, j) of output
// pixel o's window, 0 in the padding. Along a row of outputs a tap reads a
// row of the input, so the inner loop runs along both.
void unfold(const layers::Conv2dGeometry& g, const float* x, float* cols) {
  const std::int64_t taps = g.kernel_h * g.kernel_w;
  for (std::int64_t p = 0; p < g.patch_size(); ++p) {
    const std::int64_t c = p / taps, i = p / g.kernel_w % g.kernel_h, j = p % g.kernel_w;
    const float* plane = x + c * g.height * g.width;
    for (std::int64_t oh = 0; oh < g.out_height; ++oh) {
      float* out = cols + (p * g.out_height + oh) * g.out_width;
      const std::int64_t y = oh * g.stride - g.padding + i * g.dilation;
      if (y < 0 || y >= g.height) {
        std::fill(out, out + g.out_width, 0.0f);
        continue;
      }
      for (std::int64_t ow = 0; ow < g.out_width; ++ow) {
        const std::int64_t x_at = ow * g.stride - g.padding + j * g.dilation;
        out[ow] = x_at >= 0 && x_at < g.width ? plane[y * g.width + x_at] : 0.0f;
      }
    }
  }
}

}  // namespace

bool suits(const layers::Conv2dGeometry& g) { return g.channels < kFewChannels; }

void backward_weights(const layers::Conv2dGeometry& g, const float* x, const float* dy, int dy_block, float* dw,
                      float* dbias) {
  if (dbias != nullptr) conv2d_bias_gradient(g, dy, dy_block, dbias);
  if (dw == nullptr) return;
  const std::int64_t pixels = g.out_pixels(), depth = g.patch_size(), size = g.weight_size();
  const std::int64_t groups = std::min(kGroups, g.batch);
  // dY_n's rows, a block of channels at a time: NCHW is one block of K
  // rows (K x OH OW), each of oneDNN's blocks B rows stored transposed
  // (OH OW x B), whose products give dW's B rows.
  const std::int64_t rows = dy_block == 0 ? g.filters : dy_block, blocks = g.filters / rows;
  std::vector<float> sums(static_cast<std::size_t>(groups * size));
#pragma omp parallel for schedule(static)
  for (std::int64_t group = 0; group < groups; ++group) {
    float* cols = static_cast<float*>(
        onednn::staging(onednn::Slot::Input, static_cast<std::size_t>(depth * pixels) * sizeof(float)));
    for (std::int64_t n = group * g.batch / groups; n < (group + 1) * g.batch / groups; ++n) {
      unfold(g, x + n * g.input_image_size(), cols);
      for (std::int64_t b = 0; b < blocks; ++b) {
        backend::GemmArgs product;
        product.trans_a = dy_block != 0;
        product.trans_b = true;
        product.m = rows, product.n = depth, product.k = pixels;
        product.beta = n == group * g.batch / groups ? 0.0f : 1.0f;
        product.a = dy + (n * blocks + b) * pixels * rows, product.b = cols;
        product.c = sums.data() + group * size + b * rows * depth;
        cpu_backend::gemm(product);
      }
    }
  }
  std::fill(dw, dw + size, 0.0f);
  for (std::int64_t group = 0; group < groups; ++group) {
    for (std::int64_t e = 0; e < size; ++e) dw[e] += sums[static_cast<std::size_t>(group * size + e)];
  }
}

}  // namespace ddl::cpu_backend::unfolded
