// Pooling on the CPU: direct loops over each window, one N*C plane per
// OpenMP iteration. Planes are independent, so backward's scatter-adds
// (overlapping windows when stride < kernel) never race, and the result is
// the same for every thread count.
#include <ddl/core/cpu/parallel_for.hpp>
#include <ddl/layers/pool2d_kernels.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ddl::layers::pool2d_detail {
namespace {

// The window of output (oh, ow) clipped to the input: rows [row_begin,
// row_end), columns [col_begin, col_end). Never empty: padding is at most
// half the kernel, and even a ceil_mode window starts inside the input or
// its left padding.
struct Window {
  std::int64_t row_begin, row_end, col_begin, col_end;
  std::int64_t divisor;  // what average pooling divides the window's sum by
};

Window window_of(const Geometry& g, std::int64_t oh, std::int64_t ow) {
  const std::int64_t top = oh * g.stride - g.padding, left = ow * g.stride - g.padding;
  Window w{std::max<std::int64_t>(top, 0), std::min(top + g.kernel, g.height), std::max<std::int64_t>(left, 0),
           std::min(left + g.kernel, g.width), 0};
  // Counting padding counts the padded positions, but not those past the
  // right or bottom padding that only a ceil_mode window reaches (PyTorch).
  w.divisor = g.count_include_pad ? (std::min(top + g.kernel, g.height + g.padding) - top) *
                                        (std::min(left + g.kernel, g.width + g.padding) - left)
                                  : (w.row_end - w.row_begin) * (w.col_end - w.col_begin);
  return w;
}

// Runs body(plane) for every N*C plane, on OpenMP threads when the work is
// large enough to pay for waking them.
template <class Body>
void for_each_plane(const Geometry& g, const Body& body) {
  const std::int64_t planes = g.planes();
  const std::int64_t work = planes * g.out_height * g.out_width * g.kernel * g.kernel;
#pragma omp parallel for schedule(static) if (work >= cpu_backend::kParallelGrain)
  for (std::int64_t plane = 0; plane < planes; ++plane) body(plane);
}

// Makes the first NaN of the window the winner, if there is one.
void first_nan(const float* in, std::int64_t width, const Window& w, float& best, std::int64_t& best_index) {
  for (std::int64_t r = w.row_begin; r < w.row_end; ++r) {
    for (std::int64_t c = w.col_begin; c < w.col_end; ++c) {
      if (std::isnan(in[r * width + c])) {
        best = in[r * width + c];
        best_index = r * width + c;
        return;
      }
    }
  }
}

// Max pooling of one plane where the windows tile the input (kernel ==
// stride, no padding), for the full windows: out_rows x out_cols of them.
// The kernel size is a template parameter, so that a window's loops unroll
// and the loop over a row of windows is straight-line code the compiler
// vectorises (strided loads, the running maximum and its index in
// registers). Each window still sees its values in row-major order and
// keeps its first maximum, as the general loop does. Returns false if a
// window holds a NaN, which the caller then redoes exactly. Without
// kWinners no index is kept (nothing will take the gradient back).
template <std::int64_t K, bool kWinners>
bool max_tiled_windows(const Geometry& g, const float* in, float* out, std::int64_t* winner, std::int64_t out_rows,
                       std::int64_t out_cols) {
  const std::int64_t width = g.width, out_width = g.out_width;
  int nan_seen = 0;  // an integer OR, which vectorises where a float sum would not
  for (std::int64_t oh = 0; oh < out_rows; ++oh) {
    const std::int64_t top = oh * K * width;
    for (std::int64_t ow = 0; ow < out_cols; ++ow) {
      float best = -std::numeric_limits<float>::infinity();
      std::int64_t best_index = top + ow * K;
      for (std::int64_t i = 0; i < K; ++i) {
        for (std::int64_t j = 0; j < K; ++j) {
          const std::int64_t at = top + i * width + ow * K + j;
          const float v = in[at];
          nan_seen |= static_cast<int>(std::isnan(v));
          const bool better = v > best;
          best = better ? v : best;
          best_index = better ? at : best_index;
        }
      }
      out[oh * out_width + ow] = best;
      if constexpr (kWinners) winner[oh * out_width + ow] = best_index;
    }
  }
  return nan_seen == 0;
}

template <bool kWinners>
bool max_tiled_windows(const Geometry& g, const float* in, float* out, std::int64_t* winner, std::int64_t out_rows,
                       std::int64_t out_cols) {
  return g.kernel == 2 ? max_tiled_windows<2, kWinners>(g, in, out, winner, out_rows, out_cols)
                       : max_tiled_windows<3, kWinners>(g, in, out, winner, out_rows, out_cols);
}

// Max pooling of the windows of one plane with out_row_begin <= oh and
// out_col_begin <= ow (the rest done by max_tiled_windows), window by window;
// the winners too where `winner` is not null.
void max_windows(const Geometry& g, const float* in, float* out, std::int64_t* winner, std::int64_t out_row_begin,
                 std::int64_t out_col_begin) {
  for (std::int64_t oh = 0; oh < g.out_height; ++oh) {
    for (std::int64_t ow = oh < out_row_begin ? out_col_begin : 0; ow < g.out_width; ++ow) {
      const Window w = window_of(g, oh, ow);
      float best = -std::numeric_limits<float>::infinity();
      std::int64_t best_index = w.row_begin * g.width + w.col_begin;
      // The hot loop compares and selects without branches; `probe`
      // (the window's sum) becomes NaN if any value is NaN, which sends
      // the rare window to the exact rule below: the first NaN wins, so
      // NaNs propagate. (inf - inf also lands there, harmlessly.)
      float probe = 0.0f;
      for (std::int64_t r = w.row_begin; r < w.row_end; ++r) {
        for (std::int64_t c = w.col_begin; c < w.col_end; ++c) {
          const float v = in[r * g.width + c];
          probe += v;
          const bool better = v > best;  // strictly: the first maximum stays
          best = better ? v : best;
          best_index = better ? r * g.width + c : best_index;
        }
      }
      if (std::isnan(probe)) first_nan(in, g.width, w, best, best_index);
      out[oh * g.out_width + ow] = best;
      if (winner != nullptr) winner[oh * g.out_width + ow] = best_index;
    }
  }
}

}  // namespace

void max_forward_cpu(const Geometry& geometry, std::span<const float> x, std::span<float> y,
                     std::span<std::int64_t> argmax) {
  const Geometry g = geometry;  // a local copy: the loops' bounds stay in registers
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
  // With tiling windows of 2 or 3 (Keras's MaxPooling2D(2), and
  // Simonyan & Zisserman's 3), those wholly inside the input go the fast way.
  const bool tiles = g.kernel == g.stride && g.padding == 0 && (g.kernel == 2 || g.kernel == 3);
  const std::int64_t full_rows = tiles ? g.height / g.kernel : 0, full_cols = tiles ? g.width / g.kernel : 0;
  for_each_plane(g, [=](std::int64_t plane) {
    const float* in = x.data() + plane * in_plane;
    float* out = y.data() + plane * out_plane;
    std::int64_t* winner = argmax.empty() ? nullptr : argmax.data() + plane * out_plane;
    const bool exact = winner != nullptr ? max_tiled_windows<true>(g, in, out, winner, full_rows, full_cols)
                                         : max_tiled_windows<false>(g, in, out, winner, full_rows, full_cols);
    max_windows(g, in, out, winner, exact ? full_rows : 0, exact ? full_cols : 0);
  });
}

void max_backward_cpu(const Geometry& g, std::span<const float> dy, std::span<const std::int64_t> argmax,
                      std::span<float> dx) {
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
  for_each_plane(g, [&](std::int64_t plane) {
    const float* grad_out = dy.data() + plane * out_plane;
    const std::int64_t* winner = argmax.data() + plane * out_plane;
    float* grad_in = dx.data() + plane * in_plane;
    // Zeroed plane by plane, so the scatter finds the plane in cache.
    std::fill(grad_in, grad_in + in_plane, 0.0f);
    for (std::int64_t o = 0; o < out_plane; ++o) grad_in[winner[o]] += grad_out[o];
  });
}

namespace {

// Runs body(image, channel block) for every block of B channels of every
// image, as for_each_plane does for planes.
template <class Body>
void for_each_block(const Geometry& g, std::int64_t block, const Body& body) {
  const std::int64_t blocks = g.channels / block;
  const std::int64_t work = g.planes() * g.out_height * g.out_width * g.kernel * g.kernel;
#pragma omp parallel for schedule(static) if (work >= cpu_backend::kParallelGrain)
  for (std::int64_t task = 0; task < g.batch * blocks; ++task) body(task / blocks, task % blocks);
}

// A pixel's B channels' running maxima and their positions, B lanes side
// by side: vectorised across the lanes, where the NCHW loops above
// vectorise across windows. Positions are kept in 32 bits (a plane's
// fit), so that they fill the same vector lanes as the values, and half
// the memory the NCHW loops' take. As there, the hot rule only compares
// (strictly greater: the first maximum stays) and reports the NaNs it
// passes, and a block of channels that held one is pooled again by the
// exact rule, under which the first NaN wins. (The exact rule on every
// value ran the MNIST CNN's pooling 1.3x slower.)
//
// The lanes are GCC's vector extension, kept in registers: arrays with a
// select per lane became masked stores to the stack and a branch each,
// 1.6x slower. Typedefs in a class of their own: GCC (12) drops the
// attribute from those whose size depends on the enclosing template's
// parameter.
template <int B>
struct BlockVectors {
  typedef float Values __attribute__((vector_size(B * sizeof(float))));
  typedef std::int32_t Lanes __attribute__((vector_size(B * sizeof(std::int32_t))));
};

template <int B>
struct RunningMax {
  using Values = typename BlockVectors<B>::Values;
  using Lanes = typename BlockVectors<B>::Lanes;

  Values best;
  Lanes index;

  explicit RunningMax(std::int64_t first)
      : best(Values{} - std::numeric_limits<float>::infinity()), index(Lanes{} + static_cast<std::int32_t>(first)) {}
  // Takes the B values at position `at`; returns the lanes where a value
  // is NaN (-1).
  template <bool kExact>
  [[gnu::always_inline]] Lanes take(const float* values, std::int64_t at) {
    Values v;
    std::memcpy(&v, values, sizeof v);
    const Lanes nan = v != v;
    const Lanes better = kExact ? (v > best) | (nan & (best == best)) : v > best;
    best = better ? v : best;
    index = better ? Lanes{} + static_cast<std::int32_t>(at) : index;
    return nan;
  }
  void store(float* values, std::int32_t* positions) const {
    std::memcpy(values, &best, sizeof best);
    if (positions != nullptr) std::memcpy(positions, &index, sizeof index);
  }
};

// K > 0: windows of K x K at stride K without padding (Keras's
// MaxPooling2D(2)), whose loops unroll for those wholly inside the input;
// K = 0: any windows.
template <int B, int K>
void max_blocked(const Geometry& g, const float* x, float* y, std::int32_t* winners) {
  using Lanes = typename RunningMax<B>::Lanes;
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
  const std::int64_t full_rows = K > 0 ? g.height / K : 0, full_cols = K > 0 ? g.width / K : 0;
  for_each_block(g, B, [=](std::int64_t n, std::int64_t cb) {
    const std::int64_t plane = n * (g.channels / B) + cb;
    const float* in = x + plane * in_plane * B;
    // Every window of the block by one rule; the lanes where a NaN was seen.
    const auto pool = [&](auto exact) {
      Lanes unordered = {};
      for (std::int64_t oh = 0; oh < g.out_height; ++oh) {
        for (std::int64_t ow = 0; ow < g.out_width; ++ow) {
          const bool tile = K > 0 && oh < full_rows && ow < full_cols;
          const Window w = tile ? Window{oh * K, oh * K + K, ow * K, ow * K + K, K * K} : window_of(g, oh, ow);
          RunningMax<B> running(w.row_begin * g.width + w.col_begin);
          if (tile) {
#pragma GCC unroll 3
            for (int i = 0; i < K; ++i) {
#pragma GCC unroll 3
              for (int j = 0; j < K; ++j) {
                const std::int64_t at = (w.row_begin + i) * g.width + w.col_begin + j;
                unordered |= running.template take<exact()>(in + at * B, at);
              }
            }
          } else {
            for (std::int64_t r = w.row_begin; r < w.row_end; ++r) {
              for (std::int64_t c = w.col_begin; c < w.col_end; ++c) {
                unordered |= running.template take<exact()>(in + (r * g.width + c) * B, r * g.width + c);
              }
            }
          }
          const std::int64_t o = (plane * out_plane + oh * g.out_width + ow) * B;
          running.store(y + o, winners != nullptr ? winners + o : nullptr);
        }
      }
      return unordered;
    };
    const Lanes unordered = pool(std::false_type{});
    std::int32_t any = 0;
    for (int l = 0; l < B; ++l) any |= unordered[l];
    if (any != 0) pool(std::true_type{});
  });
}

template <int B>
void max_blocked(const Geometry& g, const float* x, float* y, std::int32_t* winners) {
  const bool tiles = g.kernel == g.stride && g.padding == 0;
  if (tiles && g.kernel == 2) return max_blocked<B, 2>(g, x, y, winners);
  if (tiles && g.kernel == 3) return max_blocked<B, 3>(g, x, y, winners);
  max_blocked<B, 0>(g, x, y, winners);
}

template <int B>
void max_backward_blocked(const Geometry& g, const float* dy, bool dy_blocked, const std::int32_t* winners, float* dx) {
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
  for_each_block(g, B, [=](std::int64_t n, std::int64_t cb) {
    const std::int64_t plane = n * (g.channels / B) + cb;
    float* grad_in = dx + plane * in_plane * B;
    std::fill(grad_in, grad_in + in_plane * B, 0.0f);
    const std::int32_t* winner = winners + plane * out_plane * B;
    for (std::int64_t o = 0; o < out_plane; ++o) {
      for (int l = 0; l < B; ++l) {
        // The same additions in the same order as the NCHW loop's, lane by lane.
        const float grad =
            dy_blocked ? dy[(plane * out_plane + o) * B + l] : dy[(n * g.channels + cb * B + l) * out_plane + o];
        grad_in[winner[o * B + l] * B + l] += grad;
      }
    }
  });
}

}  // namespace

void max_forward_blocked_cpu(const Geometry& g, int block, std::span<const float> x, std::span<float> y,
                             std::span<std::int32_t> argmax) {
  std::int32_t* winners = argmax.empty() ? nullptr : argmax.data();
  if (block == 16) return max_blocked<16>(g, x.data(), y.data(), winners);
  max_blocked<8>(g, x.data(), y.data(), winners);
}

void max_backward_blocked_cpu(const Geometry& g, int block, std::span<const float> dy, bool dy_blocked,
                              std::span<const std::int32_t> argmax, std::span<float> dx) {
  if (block == 16) return max_backward_blocked<16>(g, dy.data(), dy_blocked, argmax.data(), dx.data());
  max_backward_blocked<8>(g, dy.data(), dy_blocked, argmax.data(), dx.data());
}

void avg_forward_cpu(const Geometry& g, std::span<const float> x, std::span<float> y) {
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
  for_each_plane(g, [&](std::int64_t plane) {
    const float* in = x.data() + plane * in_plane;
    float* out = y.data() + plane * out_plane;
    for (std::int64_t oh = 0; oh < g.out_height; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_width; ++ow) {
        const Window w = window_of(g, oh, ow);
        float total = 0.0f;
        for (std::int64_t r = w.row_begin; r < w.row_end; ++r) {
          for (std::int64_t c = w.col_begin; c < w.col_end; ++c) total += in[r * g.width + c];
        }
        out[oh * g.out_width + ow] = total * (1.0f / static_cast<float>(w.divisor));
      }
    }
  });
}

void avg_backward_cpu(const Geometry& g, std::span<const float> dy, std::span<float> dx) {
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
  for_each_plane(g, [&](std::int64_t plane) {
    const float* grad_out = dy.data() + plane * out_plane;
    float* grad_in = dx.data() + plane * in_plane;
    std::fill(grad_in, grad_in + in_plane, 0.0f);
    for (std::int64_t oh = 0; oh < g.out_height; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_width; ++ow) {
        const Window w = window_of(g, oh, ow);
        const float share = grad_out[oh * g.out_width + ow] * (1.0f / static_cast<float>(w.divisor));
        for (std::int64_t r = w.row_begin; r < w.row_end; ++r) {
          for (std::int64_t c = w.col_begin; c < w.col_end; ++c) grad_in[r * g.width + c] += share;
        }
      }
    }
  });
}

}  // namespace ddl::layers::pool2d_detail
