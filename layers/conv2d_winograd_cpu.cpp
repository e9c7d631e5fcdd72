// Winograd's minimal filtering F(4x4, 3x3) (Winograd 1980; Lavin & Gray
// 2016) for 3x3 convolutions at stride 1 on the CPU, forward and both
// backward directions: ddl's own, for CPUs where oneDNN has no Winograd
// kernel (it has one for AVX-512 only; see conv2d_cpu.cpp for who runs
// what).
//
// The output is cut into 4x4 tiles. Each tile's 6x6 input patch d and each
// 3x3 filter g go to a 6x6 "transformed" domain, V = Bᵀ d B and
// U = G g Gᵀ, where the convolution becomes a pointwise product summed over
// channels, M = Σ_c U ⊙ V, and the tile comes back as Y = Aᵀ M A. The
// 36 pointwise products, one per point ξ of the 6x6 domain, are 36 GEMMs
// over the tiles: M[ξ] (tiles x K) = V[ξ] (tiles x C) · U[ξ] (C x K).
// They hold 36 multiply-adds per tile and channel pair where the direct
// sum holds 16 x 9 = 144, so 4x fewer; the transforms are cheap beside
// them. The price is rounding: the transforms' coefficients (up to
// 8 in Aᵀ, 5 in Bᵀ, 1/24 in G) amplify float32's error a few times over the
// direct sum's (tests/layers/test_conv2d.cpp measures it).
//
// The backward directions are the same algebra:
//   dX is a forward convolution of dY (padded by 2 - p) with each filter
//      turned by 180° and the channel roles swapped;
//   dW comes from differentiating Y = Aᵀ (U ⊙ V) A: the tile's gradient in
//      the transformed domain is dM = A dY Aᵀ, then dU[ξ] (C x K) =
//      V[ξ]ᵀ · dM[ξ] summed over all tiles (one GEMM per ξ, the sum over
//      tiles as its depth), and dW = Gᵀ dU G.
//
// The batch goes through in chunks of images whose transformed tiles fit
// kChunkBytes, so that what the transforms write is still in cache when
// the GEMMs read it. The transforms take 8 (AVX2) or 16 (AVX-512)
// channels at once, a patch point's channels one vector: each row of tiles
// gathers the image rows it needs into a small strip, channels side by
// side, by transposes in registers, and the outputs go back to NCHW the
// same way. With at least 4 chunks a thread, each chunk runs on one
// thread, transforms and GEMMs with no barrier between them (the filters'
// gradient summed per group of chunks, 16 groups at most, fixed by the
// shape, then the groups added in order: a group to a thread on up to 4
// threads); with fewer, the chunks go one after another and the work
// inside each is split.
// Backward takes both directions through each chunk together, so that
// dY's chunk is read for the second while still in cache (6-9% faster
// than a pass for each, measured when the chunks were still copied
// channels-last; docs/PERFORMANCE.md).
// Every loop splits its work by image, tile or channel and the GEMMs are
// ddl's (results independent of the thread count), so a result is the same
// bits on any thread count, in either mode.
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cpu/onednn.hpp>
#include <ddl/core/cpu/parallel_for.hpp>
#include <ddl/layers/conv2d_winograd.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <utility>

namespace ddl::cpu_backend::winograd {
namespace {

constexpr std::int64_t kTile = 4;     // output tile side
constexpr std::int64_t kPatch = 6;    // input patch side: kTile + 3 - 1
constexpr std::int64_t kPoints = 36;  // kPatch², one GEMM each
// Channels transformed together: the transforms' loops over them are the
// vectorised ones, one register of the widest the build targets, AVX-512's
// 16 floats or AVX2's 8. set_transform_lanes forces either, so that the
// tests run both on any CPU. 16 on AVX2, two registers a vector, ran the
// MNIST CNN's 32->64 layer forward 4-7% faster but forward and backward
// 6-8% slower (docs/PERFORMANCE.md), so AVX2 keeps 8. On a Zen 5
// (AVX-512) 16 ran that layer's forward and backward 7-23% faster on one
// thread and 2-12% slower on two; AVX-512 takes 16, one register, though
// there `auto` runs oneDNN's Winograd, not these kernels.
#ifdef __AVX512F__
constexpr int kNativeLanes = 16;
#else
constexpr int kNativeLanes = 8;
#endif
// The transformed tiles (V and M, or V and dM) of one chunk of images.
// They must still be in cache when the GEMMs read them, and the last-level
// cache is shared with whatever else the machine runs: on a Zen 3 (512 KiB
// of L2 a core, 32 MiB of L3 shared), 2 MiB ran the MNIST CNN's 32->64
// layer fastest of 1-16 MiB, and 16 MiB a third slower
// (docs/PERFORMANCE.md).
constexpr std::int64_t kChunkBytes = std::int64_t{2} << 20;
// The filters' gradient is summed in up to this many groups of chunks at
// once, each group's sum (36 x channels x filters) kept apart, in at most
// kWeightGradientGroupBytes of them all.
constexpr std::int64_t kWeightGradientGroups = 16, kWeightGradientGroupBytes = std::int64_t{16} << 20;

template <std::size_t Rows, std::size_t Cols>
using Matrix = std::array<std::array<float, Cols>, Rows>;
template <std::size_t Rows, std::size_t Cols>
constexpr std::int64_t columns(const Matrix<Rows, Cols>& /*m*/) {
  return Cols;
}

template <std::size_t Rows, std::size_t Cols>
constexpr Matrix<Cols, Rows> transpose(const Matrix<Rows, Cols>& m) {
  Matrix<Cols, Rows> t{};
  for (std::size_t i = 0; i < Rows; ++i) {
    for (std::size_t j = 0; j < Cols; ++j) t[j][i] = m[i][j];
  }
  return t;
}

// Lavin & Gray's matrices for F(4x4, 3x3), interpolating at 0, ±1, ±2, ∞.
constexpr Matrix<6, 6> kBt = {{{4, 0, -5, 0, 1, 0},
                               {0, -4, -4, 1, 1, 0},
                               {0, 4, -4, -1, 1, 0},
                               {0, -2, -1, 2, 1, 0},
                               {0, 2, -1, -2, 1, 0},
                               {0, 4, 0, -5, 0, 1}}};
constexpr Matrix<6, 3> kG = {{{1.0f / 4, 0, 0},
                              {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                              {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                              {1.0f / 24, 1.0f / 12, 1.0f / 6},
                              {1.0f / 24, -1.0f / 12, 1.0f / 6},
                              {0, 0, 1}}};
constexpr Matrix<4, 6> kAt = {{{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
constexpr Matrix<6, 4> kA = transpose(kAt);
constexpr Matrix<3, 6> kGt = transpose(kG);

template <std::size_t Rows, std::size_t Cols>
constexpr bool no_zero_row(const Matrix<Rows, Cols>& m) {
  return std::none_of(m.begin(), m.end(), [](const auto& row) {
    return std::all_of(row.begin(), row.end(), [](float e) { return e == 0; });
  });
}
static_assert(no_zero_row(kBt) && no_zero_row(kG) && no_zero_row(kAt) && no_zero_row(kA) && no_zero_row(kGt));

// L channels' values at one point: one SIMD operand (GCC's vector
// extension), and a column of them. A typedef in a class, as GCC (12)
// drops the attribute from an alias template whose size depends on L.
template <int L>
struct Simd {
  typedef float Lanes __attribute__((vector_size(L * sizeof(float))));
};
template <int L>
using Lanes = typename Simd<L>::Lanes;
static_assert(sizeof(Lanes<8>) == 8 * sizeof(float) && sizeof(Lanes<16>) == 16 * sizeof(float));
template <class V, std::size_t N>
using Column = std::array<V, N>;

// y = m · x, for a vector of channels at once. The matrices are constants, so
// once this is inlined and unrolled the compiler drops the zero terms, and
// each sum starts from its first term, not from an added zero (every row
// of the matrices above has a nonzero term).
template <std::size_t Rows, std::size_t Cols, class V>
[[gnu::always_inline]] inline void times(const Matrix<Rows, Cols>& m, const Column<V, Cols>& x, Column<V, Rows>& y) {
#pragma GCC unroll 8
  for (std::size_t i = 0; i < Rows; ++i) {
    bool first = true;
#pragma GCC unroll 8
    for (std::size_t s = 0; s < Cols; ++s) {
      if (m[i][s] == 0) continue;
      y[i] = first ? m[i][s] * x[s] : y[i] + m[i][s] * x[s];
      first = false;
    }
  }
}

// m · in · mᵀ for the Cols x Cols block read by in(s, j, value), each
// result handed to out(i, j, value): m down each column of the block, then
// along each row of the half-way result. One column's inputs and sums fit
// in registers (at most 12 of AVX2's 16), where a whole block of them did
// not: the compiler kept it on the stack and the transforms ran 3x
// slower. The callbacks take and hand references: a vector returned by
// value has no register to go in on a build without AVX (GCC warns of the
// ABI change).
template <class V, std::size_t Rows, std::size_t Cols, class In, class Out>
[[gnu::always_inline]] inline void sandwich(const Matrix<Rows, Cols>& m, const In& in, const Out& out) {
  std::array<Column<V, Cols>, Rows> half;
#pragma GCC unroll 8
  for (std::size_t j = 0; j < Cols; ++j) {
    Column<V, Cols> column;
    Column<V, Rows> product;
#pragma GCC unroll 8
    for (std::size_t s = 0; s < Cols; ++s) in(s, j, column[s]);
    times(m, column, product);
#pragma GCC unroll 8
    for (std::size_t i = 0; i < Rows; ++i) half[i][j] = product[i];
  }
#pragma GCC unroll 8
  for (std::size_t i = 0; i < Rows; ++i) {
    Column<V, Rows> product;
    times(m, half[i], product);
#pragma GCC unroll 8
    for (std::size_t j = 0; j < Rows; ++j) out(i, j, product[j]);
  }
}

// A whole block of L channels, as a compile-time count: its loads and
// stores below are then single vector moves, where a count known only at
// run time leaves the compiler keeping every value in memory.
template <int L>
using WholeBlock = std::integral_constant<std::int64_t, L>;
template <class Count>
constexpr bool kWhole = !std::is_integral_v<Count>;  // a WholeBlock, not a count known at run time

// Runs body(c0, lanes) for each block of L of `channels` channels from
// c0: `lanes` is WholeBlock<L> for a whole one, the count for a last
// partial one.
template <int L, class Body>
[[gnu::always_inline]] inline void for_each_lane_block(std::int64_t channels, const Body& body) {
  std::int64_t c0 = 0;
  for (; c0 + L <= channels; c0 += L) body(c0, WholeBlock<L>{});
  if (c0 < channels) body(c0, channels - c0);
}

// v = the first `lanes` values at `from` (zeros after them), and back. A
// whole block is a copy of constant size, one vector move (a cast to a
// vector pointer would need `may_alias`, and then every store could change
// any value the loops keep in registers); a part is a copy of variable
// length.
template <class V, class Count>
void load(const float* from, Count lanes, V& v) {
  if constexpr (kWhole<Count>) {
    std::memcpy(&v, from, sizeof(V));
  } else {
    v = V{};
    std::memcpy(&v, from, static_cast<std::size_t>(lanes) * sizeof(float));
  }
}
template <class V, class Count>
void store(const V& v, float* to, Count lanes) {
  if constexpr (kWhole<Count>) {
    std::memcpy(to, &v, sizeof(V));
  } else {
    std::memcpy(to, &v, static_cast<std::size_t>(lanes) * sizeof(float));
  }
}

std::int64_t chunks_of(std::int64_t batch, std::int64_t chunk) { return (batch + chunk - 1) / chunk; }

// One stride-1 3x3 convolution as the tiles see it: `in_channels` planes
// of height x width in, `out_channels` planes of out_height x out_width
// out, `padding` on every side.
struct Plan {
  std::int64_t in_channels, height, width;
  std::int64_t out_channels, out_height, out_width;
  std::int64_t padding;
  std::int64_t rows() const { return (out_height + kTile - 1) / kTile; }  // tiles per column of an image
  std::int64_t cols() const { return (out_width + kTile - 1) / kTile; }   // tiles per row
  std::int64_t tiles_per_image() const { return rows() * cols(); }
  // Images per chunk: as many as fit kChunkBytes, at least one.
  std::int64_t chunk(std::int64_t batch) const {
    const std::int64_t per_image =
        kPoints * tiles_per_image() * (in_channels + out_channels) * static_cast<std::int64_t>(sizeof(float));
    return std::clamp<std::int64_t>(kChunkBytes / per_image, 1, batch);
  }
  std::int64_t chunks(std::int64_t batch) const { return chunks_of(batch, chunk(batch)); }
};

// The transforms read and write the images in NCHW, as the layers hold
// them, but work on L channels at once, a point's L channels one vector.
// So each row of tiles first gathers the rows of the image its patches
// cover into a strip, a point's L channels side by side, by L x L
// transposes in registers; the outputs go back the same way. A strip is
// small (6 KB for the MNIST CNN's 32->64 layer) and read by the row's
// tiles while in cache, where the chunk's reorder to channels-last and
// back went through the caches at about 10 GB/s (docs/PERFORMANCE.md).
// With zeros in the strip outside the image, a tile over its edge needs
// no test.

// r[j][l] = r[l][j] for L vectors of L: log2(L) rounds, the round for bit
// D exchanging, between rows i and i + D, the elements whose row and column
// differ in that bit (the off-diagonal D x D blocks of each 2D x 2D block).
template <int L, int D, std::size_t... J>
[[gnu::always_inline]] inline void exchange(Lanes<L>& a, Lanes<L>& b, std::index_sequence<J...>) {
  const Lanes<L> low = __builtin_shufflevector(a, b, ((J & D) == 0 ? J : L + J - D)...);
  b = __builtin_shufflevector(a, b, ((J & D) == 0 ? J + D : L + J)...);
  a = low;
}
template <int L, int D = 1>
[[gnu::always_inline]] inline void transpose_lanes(std::array<Lanes<L>, L>& r) {
  if constexpr (D < L) {
#pragma GCC unroll 16
    for (int i = 0; i < L; ++i) {
      if ((i & D) == 0) exchange<L, D>(r[i], r[i + D], std::make_index_sequence<L>{});
    }
    transpose_lanes<L, 2 * D>(r);
  }
}

// out[j * out_stride + l] = in[l * in_stride + j] for j, l < L.
template <int L>
[[gnu::always_inline]] inline void transpose_block(const float* in, std::int64_t in_stride, float* out,
                                                   std::int64_t out_stride) {
  std::array<Lanes<L>, L> r;
#pragma GCC unroll 16
  for (int l = 0; l < L; ++l) std::memcpy(&r[l], in + l * in_stride, sizeof(Lanes<L>));
  transpose_lanes<L>(r);
#pragma GCC unroll 16
  for (int j = 0; j < L; ++j) std::memcpy(out + j * out_stride, &r[j], sizeof(Lanes<L>));
}

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }

// `rows` rows of a row of tiles' points, each point L channels' values (L
// floats), the width rounded up to whole L x L blocks. In the thread's
// staging buffer: a thread holds one at a time.
template <int L>
struct Strip {
  std::int64_t rows, width;
  float* points;  // rows x width x L

  static std::int64_t floats(std::int64_t rows, std::int64_t columns) { return rows * round_up(columns, L) * L; }
  Strip(std::int64_t strip_rows, std::int64_t columns)
      : rows(strip_rows),
        width(round_up(columns, L)),
        points(static_cast<float*>(onednn::staging(
            onednn::Slot::Strip, static_cast<std::size_t>(floats(strip_rows, columns)) * sizeof(float)))) {}
  float* at(std::int64_t i, std::int64_t j) const { return points + (i * width + j) * L; }
};

// Strip point (i, j) = the first `lanes` of the L planes (NCHW, height x
// width) at `planes`, at row top + i, column left + j; zeros outside the
// planes and in the lanes past `lanes`. A block of L columns wholly inside
// is transposed from the planes; one over their edge (or short of lanes)
// from a copy with the zeros in.
template <int L, class Count>
void gather(const float* planes, std::int64_t height, std::int64_t width, Count lanes, std::int64_t top,
            std::int64_t left, const Strip<L>& s) {
  const std::int64_t plane = height * width;
  for (std::int64_t i = 0; i < s.rows; ++i) {
    const std::int64_t row = top + i;
    if (row < 0 || row >= height) {
      std::fill(s.at(i, 0), s.at(i + 1, 0), 0.0f);
      continue;
    }
    const float* line = planes + row * width;
    for (std::int64_t j = 0; j < s.width; j += L) {
      const std::int64_t col = left + j;
      if (kWhole<Count> && col >= 0 && col + L <= width) {
        transpose_block<L>(line + col, plane, s.at(i, j), L);
        continue;
      }
      std::array<float, L * L> block{};
      for (std::int64_t l = 0; l < lanes; ++l) {
        for (std::int64_t c = std::max<std::int64_t>(col, 0); c < std::min(col + L, width); ++c) {
          block[l * L + c - col] = line[l * plane + c];
        }
      }
      transpose_block<L>(block.data(), L, s.at(i, j), L);
    }
  }
}

// The other way: the first `lanes` of the L planes at row top + i, columns
// 0 .. width = strip point (i, j), for the strip's rows that lie inside
// the planes (the strip at least `width` wide).
template <int L, class Count>
void scatter(const Strip<L>& s, Count lanes, std::int64_t top, float* planes, std::int64_t height, std::int64_t width) {
  const std::int64_t plane = height * width;
  for (std::int64_t i = 0; i < std::min(s.rows, height - top); ++i) {
    float* line = planes + (top + i) * width;
    for (std::int64_t j = 0; j < width; j += L) {
      if (kWhole<Count> && j + L <= width) {
        transpose_block<L>(s.at(i, j), L, line + j, plane);
        continue;
      }
      std::array<float, L * L> block;
      transpose_block<L>(s.at(i, j), L, block.data(), L);
      for (std::int64_t l = 0; l < lanes; ++l) {
        for (std::int64_t c = j; c < std::min(j + L, width); ++c) line[l * plane + c] = block[l * L + c - j];
      }
    }
  }
}

// Runs body(image, row, c0, lanes) for each row of tiles of `images`
// images and each block of L of `channels` channels from c0 (lanes as in
// for_each_lane_block), split over the threads; a row's blocks next to one
// another, as the tiles' values of neighbouring blocks share cache lines.
// As tasks: a body may throw (its strip's staging buffer out of memory),
// which must not leave an OpenMP region.
template <int L, class Body>
void for_each_tile_row(const Plan& p, std::int64_t images, std::int64_t channels, const Body& body) {
  const std::int64_t blocks = (channels + L - 1) / L;
  parallel_tasks(images * p.rows() * blocks, [&](std::int64_t task) {
    const std::int64_t c0 = task % blocks * L, row = task / blocks % p.rows(), image = task / blocks / p.rows();
    if (c0 + L <= channels) {
      body(image, row, c0, WholeBlock<L>{});
    } else {
      body(image, row, c0, channels - c0);
    }
  });
}

// The point (i, j) of tile `col`'s patch in a strip, and back.
template <int L>
void read_point(const Strip<L>& s, std::int64_t col, std::int64_t i, std::int64_t j, Lanes<L>& value) {
  std::memcpy(&value, s.at(i, col * kTile + j), sizeof(value));
}
template <int L>
void write_point(const Lanes<L>& value, std::int64_t col, std::int64_t i, std::int64_t j, const Strip<L>& s) {
  std::memcpy(s.at(i, col * kTile + j), &value, sizeof(value));
}

// A row of tiles' patches of `side` x `side` points: the strip's columns.
std::int64_t strip_columns(const Plan& p, std::int64_t side) { return p.cols() * kTile + side - kTile; }

// out[ξ][t][c] = (T d Tᵀ)[ξ] for tile t's square patch d (as wide as T)
// of channel c of `images` images' planes (NCHW, height x width), the
// patches of row r of tiles starting at row r * kTile + offset and of its
// first tile at column offset, zeros outside the planes. T is a template
// argument so that the transform's zero terms fold away as constants.
template <int L, const auto& T>
void transform_patches(const Plan& p, std::int64_t images, std::int64_t channels, const float* planes,
                       std::int64_t height, std::int64_t width, std::int64_t offset, float* out) {
  static_assert(std::tuple_size_v<std::remove_cvref_t<decltype(T)>> == kPatch, "T must give a 6x6 patch");
  using V = Lanes<L>;
  constexpr std::int64_t kSide = columns(T);
  const std::int64_t tiles = images * p.tiles_per_image();
  for_each_tile_row<L>(p, images, channels, [&](std::int64_t image, std::int64_t row, std::int64_t c0, auto lanes) {
    const Strip<L> s(kSide, strip_columns(p, kSide));
    gather(planes + (image * channels + c0) * height * width, height, width, lanes, row * kTile + offset, offset, s);
    for (std::int64_t col = 0; col < p.cols(); ++col) {
      const std::int64_t t = (image * p.rows() + row) * p.cols() + col;
      sandwich<V>(
          T, [&](std::int64_t i, std::int64_t j, V& d) { read_point(s, col, i, j, d); },
          [&](std::int64_t i, std::int64_t j, const V& value) {
            store(value, out + ((i * kPatch + j) * tiles + t) * channels + c0, lanes);
          });
    }
  });
}

// V[ξ][t][c] = (Bᵀ d B)[ξ] for tile t's 6x6 patch d of channel c of
// `images` images from x (NCHW), zeros outside the input.
template <int L>
void transform_inputs(const Plan& p, std::int64_t images, const float* x, float* v) {
  transform_patches<L, kBt>(p, images, p.in_channels, x, p.height, p.width, -p.padding, v);
}

// relu()'s function (fn::Relu) on each lane: v where positive or NaN,
// else +0.
template <class V>
V relu_lanes(const V& v) {
  return (v > 0.0f || v != v) ? v : V{};
}

// y (NCHW) = (Aᵀ M[.][t][k] A) + bias[k] for every tile t and output
// channel k, the parts of the 4x4 tiles that fall inside the output; with
// `relu`, relu() of that, applied before it is stored.
template <int L>
void transform_outputs(const Plan& p, std::int64_t images, const float* m, const float* bias, bool relu, float* y) {
  using V = Lanes<L>;
  const std::int64_t tiles = images * p.tiles_per_image(), channels = p.out_channels;
  for_each_tile_row<L>(p, images, channels, [&](std::int64_t image, std::int64_t row, std::int64_t k0, auto lanes) {
    V b = {};
    if (bias != nullptr) load(bias + k0, lanes, b);
    const Strip<L> s(kTile, p.cols() * kTile);
    for (std::int64_t col = 0; col < p.cols(); ++col) {
      const std::int64_t t = (image * p.rows() + row) * p.cols() + col;
      sandwich<V>(
          kAt,
          [&](std::int64_t i, std::int64_t j, V& value) {
            load(m + ((i * kPatch + j) * tiles + t) * channels + k0, lanes, value);
          },
          [&](std::int64_t i, std::int64_t j, const V& value) {
            const V sum = value + b;
            write_point<L>(relu ? relu_lanes(sum) : sum, col, i, j, s);
          });
    }
    scatter(s, lanes, row * kTile, y + (image * channels + k0) * p.out_height * p.out_width, p.out_height, p.out_width);
  });
}

// dM[ξ][t][k] = (A dy Aᵀ)[ξ] for tile t's 4x4 of output channel k's
// gradient (NCHW; zeros past the output's edge).
template <int L>
void transform_output_gradients(const Plan& p, std::int64_t images, const float* dy, float* dm) {
  transform_patches<L, kA>(p, images, p.out_channels, dy, p.out_height, p.out_width, 0, dm);
}

// U[ξ][i][o] = (G g Gᵀ)[ξ] for the filter g from input channel i to output
// channel o. Forward, g is w[o][i]; for the input's gradient (the channel
// roles swapped) it is w[i][o] turned by 180°.
template <int L>
void transform_filters(const float* w, std::int64_t in_channels, std::int64_t out_channels, bool turned, float* u) {
  using V = Lanes<L>;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < in_channels; ++i) {
    for_each_lane_block<L>(out_channels, [&](std::int64_t o0, auto lanes) {
      std::array<Column<V, 3>, 3> g = {};
      for (std::int64_t l = 0; l < lanes; ++l) {
        const float* filter = w + (turned ? (i * out_channels + o0 + l) : ((o0 + l) * in_channels + i)) * 9;
        for (std::int64_t r = 0; r < 9; ++r) g[r / 3][r % 3][l] = filter[turned ? 8 - r : r];
      }
      sandwich<V>(
          kG, [&](std::int64_t r, std::int64_t s, V& value) { value = g[r][s]; },
          [&](std::int64_t r, std::int64_t s, const V& value) {
            store(value, u + ((r * kPatch + s) * in_channels + i) * out_channels + o0, lanes);
          });
    });
  }
}

// dw[k][c] = Gᵀ dU[.][c][k] G: the filters' gradient from the transformed domain's.
template <int L>
void untransform_filter_gradients(const float* du, std::int64_t channels, std::int64_t filters, float* dw) {
  using V = Lanes<L>;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < channels; ++c) {
    for_each_lane_block<L>(filters, [&](std::int64_t k0, auto lanes) {
      sandwich<V>(
          kGt,
          [&](std::int64_t r, std::int64_t s, V& value) {
            load(du + ((r * kPatch + s) * channels + c) * filters + k0, lanes, value);
          },
          [&](std::int64_t r, std::int64_t s, const V& value) {
            for (std::int64_t l = 0; l < lanes; ++l) dw[((k0 + l) * channels + c) * 9 + r * 3 + s] = value[l];
          });
    });
  }
}

// The 36 products of a chunk, c[ξ] = op(a[ξ]) · b[ξ] (+ c[ξ] when accumulating).
backend::GemmArgs point_products(bool transpose_a, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                                 const float* b, float* c, bool accumulate) {
  backend::GemmArgs args;
  args.trans_a = transpose_a;
  args.m = m, args.n = n, args.k = k;
  args.beta = accumulate ? 1.0f : 0.0f;
  args.a = a, args.b = b, args.c = c;
  args.batch = kPoints;
  args.stride_a = m * k, args.stride_b = k * n, args.stride_c = m * n;
  return args;
}
void multiply_points(bool transpose_a, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                     float* c, bool accumulate) {
  cpu_backend::gemm(point_products(transpose_a, m, n, k, a, b, c, accumulate));
}

float* buffer(onednn::Slot slot, std::int64_t floats) {
  return static_cast<float*>(onednn::staging(slot, static_cast<std::size_t>(floats) * sizeof(float)));
}

// Runs run(i) for each of `parts` independent parts of the work (chunks of
// images, or groups of them): each part on one thread when there are
// enough to share out (kPartsPerThread a thread), so that a thread's
// transforms and GEMMs run with no barrier between them on data
// in its own cache; otherwise one part after another, the work inside each
// split over the threads. The two give the same bits: the kernels inside a
// part do.
constexpr std::int64_t kPartsPerThread = 4;

bool part_per_thread(std::int64_t parts) { return parts >= kPartsPerThread * config::num_threads(); }

template <class Run>
void for_each_part(std::int64_t parts, const Run& run) {
  // Two loops, not one with an `if` clause: measured with GCC's libgomp,
  // the work inside a region that clause turned off ran at one thread's
  // speed.
  if (!part_per_thread(parts)) {
    for (std::int64_t i = 0; i < parts; ++i) run(i);
    return;
  }
  parallel_tasks(parts, [&](std::int64_t i) {
    // Each thread one part: the loops and oneDNN calls inside on it alone,
    // even where nested parallel regions are allowed.
    const onednn::OneThread one_thread;
    run(i);
  });
}

// y = x convolved with the filters whose transforms are u, + bias (if
// any), then relu() if asked, for `images` NCHW images, through v and m
// (the chunk's V and M).
template <int L>
void convolve_chunk(const Plan& p, std::int64_t images, const float* x, const float* u, const float* bias, bool relu,
                    float* v, float* m, float* y) {
  transform_inputs<L>(p, images, x, v);
  multiply_points(false, images * p.tiles_per_image(), p.out_channels, p.in_channels, v, u, m, false);
  transform_outputs<L>(p, images, m, bias, relu, y);
}

Plan forward_plan(const layers::Conv2dGeometry& g) {
  return {g.channels, g.height, g.width, g.filters, g.out_height, g.out_width, g.padding};
}

// The input's side of backward as the tiles see it: dX = dY convolved
// with the turned filters at padding 2 - p, which makes an out_height x
// out_width input give height x width.
Plan data_plan(const layers::Conv2dGeometry& g) {
  return {g.filters, g.out_height, g.out_width, g.channels, g.height, g.width, 2 - g.padding};
}

template <int L>
void forward_at(const layers::Conv2dGeometry& g, const float* x, const float* w, const float* bias, bool relu,
                float* y) {
  float* u = buffer(onednn::Slot::Weights, kPoints * g.channels * g.filters);
  transform_filters<L>(w, g.channels, g.filters, false, u);
  const Plan p = forward_plan(g);
  const std::int64_t chunk = p.chunk(g.batch);
  for_each_part(p.chunks(g.batch), [&](std::int64_t c) {
    const std::int64_t first = c * chunk, images = std::min(chunk, g.batch - first);
    // Asked for here: running a chunk to a thread, each thread's own.
    float* v = buffer(onednn::Slot::Input, kPoints * chunk * p.tiles_per_image() * g.channels);
    float* m = buffer(onednn::Slot::Output, kPoints * chunk * p.tiles_per_image() * g.filters);
    convolve_chunk<L>(p, images, x + first * g.input_image_size(), u, bias, relu, v, m,
                      y + first * g.output_image_size());
  });
}

template <int L>
void backward_at(const layers::Conv2dGeometry& g, const layers::Conv2dBackward& o) {
  if (o.grad_bias != nullptr) conv2d_bias_gradient(g, o.grad_output, 0, o.grad_bias);
  if (o.grad_input == nullptr && o.grad_weight == nullptr) return;
  // Both sides take dY in the same chunks, so that a chunk read for one is
  // still in cache for the other: the smaller of the two sides' chunks
  // (the input's side has the more tiles where p < 1), fixed by the shape,
  // so that dW's sum does not depend on whether dX is wanted.
  const Plan p = forward_plan(g), turned = data_plan(g);
  const std::int64_t chunk = std::min(p.chunk(g.batch), turned.chunk(g.batch));
  const std::int64_t chunks = chunks_of(g.batch, chunk);
  // dU summed over the tiles of consecutive chunks in each of `groups`
  // groups, fixed by the shape (not the thread count), so that the groups
  // can run on threads of their own; then the groups' sums added in order.
  const std::int64_t du_size = kPoints * g.channels * g.filters;
  const std::int64_t groups = std::clamp<std::int64_t>(
      std::min(kWeightGradientGroupBytes / (du_size * std::int64_t{sizeof(float)}), chunks), 1, kWeightGradientGroups);
  // The turned filters' transforms, U, then the groups' sums of dU.
  float* u = buffer(onednn::Slot::Weights, (o.grad_weight != nullptr ? 1 + groups : 1) * du_size);
  float* sums = u + du_size;
  if (o.grad_input != nullptr) transform_filters<L>(o.weight, g.filters, g.channels, true, u);
  const std::int64_t tiles = chunk * std::max(p.tiles_per_image(), turned.tiles_per_image());
  for_each_part(groups, [&](std::int64_t group) {
    // Asked for here: running a group to a thread, each thread's own. V,
    // then dM or M, of whichever side runs.
    float* v = buffer(onednn::Slot::Input, kPoints * tiles * std::max(g.channels, g.filters));
    float* m = buffer(onednn::Slot::Output, kPoints * tiles * std::max(g.channels, g.filters));
    const std::int64_t begin = group * chunks / groups, end = (group + 1) * chunks / groups;
    for (std::int64_t c = begin; c < end; ++c) {
      const std::int64_t first = c * chunk, images = std::min(chunk, g.batch - first);
      const float* dy = o.grad_output + first * g.output_image_size();
      if (o.grad_weight != nullptr) {
        transform_inputs<L>(p, images, o.input + first * g.input_image_size(), v);
        transform_output_gradients<L>(p, images, dy, m);
        multiply_points(true, g.channels, g.filters, images * p.tiles_per_image(), v, m, sums + group * du_size,
                        c > begin);
      }
      if (o.grad_input != nullptr) {
        convolve_chunk<L>(turned, images, dy, u, nullptr, false, v, m, o.grad_input + first * g.input_image_size());
      }
    }
  });
  if (o.grad_weight == nullptr) return;
#pragma omp parallel for schedule(static)
  for (std::int64_t e = 0; e < du_size; ++e) {
    for (std::int64_t group = 1; group < groups; ++group) sums[e] += sums[group * du_size + e];
  }
  untransform_filter_gradients<L>(sums, g.channels, g.filters, o.grad_weight);
}

// set_transform_lanes's width; 0: the build's (kNativeLanes).
std::atomic<int> forced_lanes{0};

// Runs run(lanes), the transforms' width as a compile-time count.
template <class Run>
void at_width(const Run& run) {
  if (transform_lanes() == 16) return run(std::integral_constant<int, 16>{});
  run(std::integral_constant<int, 8>{});
}

}  // namespace

bool applies(const layers::Conv2dGeometry& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride == 1 && g.dilation == 1 && g.padding <= 2;
}

void forward(const layers::Conv2dGeometry& g, const float* x, const float* w, const float* bias, float* y, bool relu) {
  at_width([&](auto lanes) { forward_at<decltype(lanes)::value>(g, x, w, bias, relu, y); });
}

void backward(const layers::Conv2dGeometry& g, const layers::Conv2dBackward& o) {
  at_width([&](auto lanes) { backward_at<decltype(lanes)::value>(g, o); });
}

void set_transform_lanes(int lanes) {
  DDL_CHECK(lanes == 0 || lanes == 8 || lanes == 16, "winograd::set_transform_lanes: {} lanes (0, 8 or 16)", lanes);
  forced_lanes = lanes;
}

int transform_lanes() {
  const int forced = forced_lanes.load();
  return forced != 0 ? forced : kNativeLanes;
}

bool pays_off(const layers::Conv2dGeometry& g) {
  // The fewer channels, the more the transforms weigh beside the products,
  // so narrower layers need larger images: 16 channels ran slower at 14x14
  // and faster at 28x28 (16x16 kept from the earlier rule). 7x7 is the
  // smallest output measured (faster); smaller ones stay on oneDNN's.
  constexpr std::int64_t kWide = 32, kNarrow = 16, kNarrowMinSide = 16, kMinSide = 7;
  const std::int64_t channels = std::min(g.channels, g.filters), side = std::min(g.out_height, g.out_width);
  return applies(g) && side >= kMinSide && (channels >= kWide || (channels >= kNarrow && side >= kNarrowMinSide));
}

std::int64_t images_per_chunk(const layers::Conv2dGeometry& g) { return forward_plan(g).chunk(g.batch); }

Conv2dStaging forward_staging(const layers::Conv2dGeometry& g) {
  const Plan p = forward_plan(g);
  const auto bytes = [](std::int64_t floats) { return static_cast<std::size_t>(floats) * sizeof(float); };
  const std::int64_t images = p.chunk(g.batch), tiles = images * p.tiles_per_image();
  Conv2dStaging staging;
  Conv2dStaging::Slots& chunk = staging.caller;
  chunk.input = bytes(kPoints * tiles * g.channels);
  chunk.output = bytes(kPoints * tiles * g.filters);
  // The input's strips are the largest (kPatch rows, 2 columns more).
  at_width([&](auto lanes) {
    chunk.strip = bytes(Strip<decltype(lanes)::value>::floats(kPatch, strip_columns(p, columns(kBt))));
  });
  chunk.products = cpu_backend::gemm_staging_bytes(
      point_products(false, tiles, g.filters, g.channels, nullptr, nullptr, nullptr, false));
  // Every thread holds a chunk's buffers where each runs chunks of its own,
  // and a strip where they share the transforms.
  if (part_per_thread(p.chunks(g.batch))) {
    staging.each_worker = chunk;
  } else {
    staging.each_worker.strip = chunk.strip;
  }
  staging.workers = static_cast<std::size_t>(config::num_threads() - 1);
  staging.caller.weights = bytes(kPoints * g.channels * g.filters);
  return staging;
}

}  // namespace ddl::cpu_backend::winograd
