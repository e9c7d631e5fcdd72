// CPU GEMM. A float32 product runs on oneDNN's matmul, cut into tiles of C
// that one thread each computes (tiled_gemm below: the tiles depend on the
// shape alone, so the result does not depend on the thread count); a small
// one runs on Eigen, whose call costs less than oneDNN's set-up, on the
// row-major buffers mapped, not copied. Under bf16 mixed
// precision (config::cpu_precision()) oneDNN's matmul runs on operands
// rounded to bfloat16, summing in float32; and x·op(W) for a weight W that
// a PackedWeights scope holds reads the copy of W packed for it once
// (packed_weights.hpp).
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cpu/gemm_tiles.hpp>
#include <ddl/core/cpu/onednn.hpp>
#include <ddl/core/cpu/parallel_for.hpp>
#include <ddl/core/packed_weights.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string_view>
#include <tuple>

namespace ddl::cpu_backend {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const Matrix>;
using Map = Eigen::Map<Matrix>;

template <class LhsExpr, class RhsExpr>
void multiply_into(Map& c, const LhsExpr& lhs, const RhsExpr& rhs, float alpha, float beta) {
  if (beta == 0.0f) {
    c.noalias() = alpha * (lhs * rhs);  // C may hold garbage: never read it
  } else {
    if (beta != 1.0f) c *= beta;  // a full pass over C: not for an accumulation
    c.noalias() += alpha * (lhs * rhs);
  }
}

// One operand as oneDNN sees it: `batch` matrices of rows x cols, row-major
// unless transposed (stored as cols x rows), `batch_stride` apart (0: one
// matrix shared by the whole batch).
dnnl::memory::desc operand(std::int64_t batch, std::int64_t batch_stride, std::int64_t rows, std::int64_t cols,
                           bool transposed, dnnl::memory::data_type type) {
  const bool shared = batch_stride == 0;
  const std::int64_t stride = shared ? rows * cols : batch_stride;
  return {{shared ? 1 : batch, rows, cols},
          type,
          transposed ? dnnl::memory::dims{stride, 1, rows} : dnnl::memory::dims{stride, cols, 1}};
}

// Runs a matmul on operands already in its layouts, its scratchpad from
// the thread's staging buffer.
void run_matmul(std::string_view what, const dnnl::matmul::primitive_desc& pd, const dnnl::matmul& primitive,
                const dnnl::memory& src, const dnnl::memory& weights, const dnnl::memory& dst) {
  const dnnl::memory scratchpad(pd.scratchpad_desc(), onednn::engine(),
                                onednn::staging(onednn::Slot::Scratchpad, pd.scratchpad_desc().get_size()));
  onednn::execute(
      what, primitive,
      {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
}

// A matmul's attributes for C = alpha AB + beta C: alpha as its output
// scale, beta as a sum post-op, the scratchpad the caller's.
dnnl::primitive_attr product_attributes(const backend::GemmArgs& g) {
  dnnl::primitive_attr attributes = onednn::user_scratchpad();
  if (g.alpha != 1.0f) attributes.set_output_scales(0, {g.alpha});
  if (g.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(g.beta);
    attributes.set_post_ops(sum);
  }
  return attributes;
}

// One bf16 GEMM shape's matmul, created once and shared by every thread.
struct Matmul {
  dnnl::memory::desc a_user, b_user, c;  // the float32 operands as the caller lays them out
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

// The operands are rounded in the caller's layout, a plain conversion.
// Rounded into a layout of oneDNN's choosing (row-major), every transposed
// operand (the gradients' products') was transposed too: wide_mlp's
// 4096 x 4096 layer took 84-95 ms forward and backward in bf16 that way,
// 48-52 now (docs/PERFORMANCE.md). oneDNN's bf16 matmul kernel (brgemm)
// reads either operand transposed.
Matmul make_matmul(const backend::GemmArgs& g) {
  using dnnl::memory;
  const auto a_in = [&](memory::data_type type) { return operand(g.batch, g.stride_a, g.m, g.k, g.trans_a, type); };
  const auto b_in = [&](memory::data_type type) { return operand(g.batch, g.stride_b, g.k, g.n, g.trans_b, type); };
  const auto f32 = memory::data_type::f32, bf16 = memory::data_type::bf16;
  const memory::desc c = operand(g.batch, g.stride_c, g.m, g.n, false, f32);
  const dnnl::primitive_attr attributes = product_attributes(g);
  const auto pd = onednn::describe("bf16 matmul", [&] {
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_in(bf16), b_in(bf16), c), attributes, onednn::engine());
  });
  return {a_in(f32), b_in(f32), c, pd, dnnl::matmul(pd)};
}

std::shared_ptr<const Matmul> matmul_of(const backend::GemmArgs& g) {
  using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, float, float>;
  static onednn::Cache<Key, Matmul> cache;
  return cache.get({g.trans_a, g.trans_b, g.m, g.n, g.k, g.batch, g.stride_a, g.stride_b, g.stride_c, g.alpha, g.beta},
                   [&] { return make_matmul(g); });
}

// C = alpha op(A) op(B) + beta C with op(A) and op(B) rounded to bfloat16
// (reorders into staging) and their products summed in float32 straight
// into C.
void gemm_bf16(const backend::GemmArgs& g) {
  using dnnl::memory;
  const std::shared_ptr<const Matmul> held = matmul_of(g);
  const Matmul& mm = *held;
  const memory a = onednn::to_layout(memory(mm.a_user, onednn::engine(), const_cast<float*>(g.a)), mm.pd.src_desc(),
                                     onednn::Slot::Input, "bf16 matmul: rounding A");
  const memory b = onednn::to_layout(memory(mm.b_user, onednn::engine(), const_cast<float*>(g.b)), mm.pd.weights_desc(),
                                     onednn::Slot::Weights, "bf16 matmul: rounding B");
  run_matmul("bf16 matmul", mm.pd, mm.primitive, a, b, memory(mm.c, onednn::engine(), g.c));
}

// One float32 matmul shape x[m, k]·W[k, n] with W in the layout oneDNN
// picks for it, shared by every thread.
struct PackedMatmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  std::string layout;  // of W, as PackedWeights tells its copies apart
  bool packs;          // whether that layout is a blocked one (else W is read as it is)
};

std::string layout_name(const dnnl::memory::desc& d) {
  const dnnl_blocking_desc_t& blocking = d.data.format_desc.blocking;
  const auto list = [](const auto* values, int count) { return std::vector(values, values + count); };
  return fmt::format("dims {} strides {} blocks {} of dims {}", d.dims(), list(blocking.strides, d.data.ndims),
                     list(blocking.inner_blks, blocking.inner_nblks), list(blocking.inner_idxs, blocking.inner_nblks));
}

std::shared_ptr<const PackedMatmul> packed_matmul_of(std::int64_t m, std::int64_t k, std::int64_t n) {
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
  static onednn::Cache<Key, PackedMatmul> cache;
  return cache.get({m, k, n}, [&] {
    using dnnl::memory;
    const auto f32 = memory::data_type::f32;
    // 2-D: for 3-D operands (a batch of one) oneDNN 2.6 offers no packed layout.
    const memory::desc any_weights({k, n}, f32, memory::format_tag::any);
    const auto pd = onednn::describe("packed matmul", [&] {
      return dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(memory::desc({m, k}, f32, memory::format_tag::ab), any_weights,
                             memory::desc({m, n}, f32, memory::format_tag::ab)),
          onednn::user_scratchpad(), onednn::engine());
    });
    const memory::desc weights = pd.weights_desc();
    const bool blocked = weights.data.format_kind == dnnl_blocked && weights.data.format_desc.blocking.inner_nblks > 0;
    return PackedMatmul{pd, dnnl::matmul(pd), layout_name(weights), blocked};
  });
}

// C = A op(B) on the copy of B that the PackedWeights scope holding it
// packed once; false (nothing done) when no scope holds B, the call is not
// a plain product, or oneDNN reads B plain for this shape.
bool gemm_packed(const backend::GemmArgs& g) {
  if (g.batch != 1 || g.trans_a || g.alpha != 1.0f || g.beta != 0.0f) return false;
  PackedWeights* const scope = PackedWeights::holding(g.b);
  if (scope == nullptr) return false;
  const std::shared_ptr<const PackedMatmul> held = packed_matmul_of(g.m, g.k, g.n);
  const PackedMatmul& mm = *held;
  if (!mm.packs) return false;
  using dnnl::memory;
  const memory::desc& packed_desc = mm.pd.weights_desc();
  // By value: later scopes pack the weight's new values with it.
  const void* packed = scope->packed(
      g.b, g.trans_b, mm.layout, packed_desc.get_size(),
      [held, b = g.b, k = g.k, n = g.n, transposed = g.trans_b](void* into) {
        using dnnl::memory;
        const memory user = onednn::wrap({k, n}, transposed ? memory::format_tag::ba : memory::format_tag::ab, b);
        const memory copy(held->pd.weights_desc(), onednn::engine(), into);
        onednn::execute("packing a weight", dnnl::reorder(user, copy), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, copy}});
      });
  run_matmul("packed matmul", mm.pd, mm.primitive, memory(mm.pd.src_desc(), onednn::engine(), const_cast<float*>(g.a)),
             memory(packed_desc, onednn::engine(), const_cast<void*>(packed)),
             memory(mm.pd.dst_desc(), onednn::engine(), g.c));
  return true;
}

// Products of fewer multiply-adds stay on Eigen: a oneDNN matmul's call
// costs a few microseconds (16 x 64 x 32: 1 us by Eigen, 4 by oneDNN), and
// from about here oneDNN's kernels are the faster (docs/PERFORMANCE.md).
constexpr std::int64_t kTiledMinMultiplyAdds = std::int64_t{1} << 20;

// The tiles of an m x n result (per matrix of a batch): C cut evenly into
// bands of at most 256 rows and 512 columns (to multiples of 16), cut
// finer (columns first, down to 128 wide; then rows, down to 64) until the
// batch has 16 tiles for the threads to share. Whole-height tiles where
// possible (each row band streams the weight once more), and no narrow
// ones: a 64-column tile of a transposed weight ran 1.3x slower than a
// 784-column one.
struct Tiling {
  std::int64_t rows, cols;
};

Tiling tiling(std::int64_t batch, std::int64_t m, std::int64_t n) {
  constexpr std::int64_t kMinTiles = 16, kNarrowest = 128, kShortest = 64;
  const auto even = [](std::int64_t size, std::int64_t parts) { return ((size + parts - 1) / parts + 15) / 16 * 16; };
  std::int64_t row_parts = (m + 255) / 256, col_parts = (n + 511) / 512;
  const auto tiles = [&] {
    return batch * ((m + even(m, row_parts) - 1) / even(m, row_parts)) *
           ((n + even(n, col_parts) - 1) / even(n, col_parts));
  };
  while (tiles() < kMinTiles) {
    // A finer cut only where it makes the tiles smaller (rounding to 16 may not).
    if (even(n, col_parts + 1) >= kNarrowest && even(n, col_parts + 1) < even(n, col_parts)) {
      ++col_parts;
    } else if (even(m, row_parts + 1) >= kShortest && even(m, row_parts + 1) < even(m, row_parts)) {
      ++row_parts;
    } else {
      break;
    }
  }
  return {std::min(m, even(m, row_parts)), std::min(n, even(n, col_parts))};
}

// A rows x cols block of a row-major matrix whose rows are `leading`
// elements long, read transposed when `transposed` (stored cols x rows).
dnnl::memory::desc block(std::int64_t rows, std::int64_t cols, std::int64_t leading, bool transposed) {
  return {{rows, cols},
          dnnl::memory::data_type::f32,
          transposed ? dnnl::memory::dims{1, leading} : dnnl::memory::dims{leading, 1}};
}

// An operand as the tiles read it: matrix i of the batch at data + i *
// stride (0: one matrix shared by the batch), its stored rows `leading`
// elements apart.
struct Operand {
  const float* data;
  std::int64_t leading, stride;
};

// For tiles of C as small as these, oneDNN's AVX2 kernels mostly read the
// operands in place (no packed copy), and one read along k with a stride
// (B as it is, A transposed) walks down a column of stored rows. When
// those rows are a multiple of 2 KiB long, the column's elements fall into
// a few cache sets and evict each other: on a Zen 3, x·W ran at 31
// GFLOP/s for a 4096-wide W against 58 for the same W with rows 64 bytes
// longer, xᵀ·g 2.4x slower, and rows of 2-12 KiB 1.4-2.1x slower
// (multiples of 1 KiB alone: 1.1-1.3x, docs/PERFORMANCE.md). Such an
// operand is copied first, each row one cache line longer, when the
// product reads each element at least kMinReuse times: at the 2x penalty
// the copy cost what 8 reads lost, at 1.4x what about 20 did.
constexpr std::int64_t kConflictingRowBytes = 2048, kRowPadding = 64 / sizeof(float), kMinReuse = 32;

// How one operand is stored and read: `batch` matrices of rows x cols,
// `stride` apart (0: one matrix shared by the batch), read along k down its
// columns or not, each element by `reuse` products of a matrix.
struct Stored {
  const float* data;
  std::int64_t rows, cols, batch, stride;
  bool read_along_columns;
  std::int64_t reuse;

  std::int64_t matrices() const { return stride == 0 ? 1 : batch; }
  bool padded() const {
    // A shared matrix is read by every product of the batch.
    const std::int64_t reads = reuse * (stride == 0 ? batch : 1);
    return read_along_columns && cols * std::int64_t{sizeof(float)} % kConflictingRowBytes == 0 && reads >= kMinReuse;
  }
  std::size_t padded_bytes() const {
    return padded() ? static_cast<std::size_t>(matrices() * rows * (cols + kRowPadding)) * sizeof(float) : 0;
  }
};

// Stored, A is k x m when transposed and B is k x n when not: read along k
// down their columns. Each element of A is read n times, of B m times.
Stored stored_a(const backend::GemmArgs& g) {
  return {g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.batch, g.stride_a, g.trans_a, g.n};
}
Stored stored_b(const backend::GemmArgs& g) {
  return {g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.batch, g.stride_b, !g.trans_b, g.m};
}

// The operand as the tiles should read it: in place, or copied with longer
// rows into `slot` (by the calling thread's team).
Operand readable(const Stored& s, onednn::Slot slot) {
  if (!s.padded()) return {s.data, s.cols, s.stride};
  const std::int64_t leading = s.cols + kRowPadding, rows = s.matrices() * s.rows;
  auto* copy = static_cast<float*>(onednn::staging(slot, s.padded_bytes()));
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    std::memcpy(copy + row * leading, s.data + row / s.rows * s.stride + row % s.rows * s.cols,
                static_cast<std::size_t>(s.cols) * sizeof(float));
  }
  return {copy, leading, s.stride == 0 ? 0 : s.rows * leading};
}

// One tile shape's matmul, made for one thread (OneThread) and shared.
// Where oneDNN would run it on its sgemm ("gemm:jit", as on AVX2; on
// AVX-512 its brgemm kernels), the tiles call that sgemm directly and no
// primitive is made: the same kernel without a primitive's call, whose
// memory objects, argument map and stream cost about 4 us (a Winograd
// chunk's 36 products of 144x64x32: 461 us through the primitive, 274 by
// sgemm). set_tile_kernel (gemm_tiles.hpp) forces either one.
struct TileMatmul {
  dnnl::matmul::primitive_desc pd;
  bool sgemm;
  dnnl::matmul primitive;  // where not sgemm
};

std::atomic<TileKernel> tile_kernel{TileKernel::Auto};

std::shared_ptr<const TileMatmul> tile_matmul_of(const backend::GemmArgs& g, std::int64_t lda, std::int64_t ldb,
                                                 std::int64_t rows, std::int64_t cols) {
  using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, float, float, TileKernel>;
  static onednn::Cache<Key, TileMatmul> cache;
  const TileKernel kernel = tile_kernel.load();
  const onednn::OneThread one_thread;  // before the lookup: the cache keys on the thread count
  return cache.get({g.trans_a, g.trans_b, g.m, g.n, g.k, lda, ldb, rows, cols, g.alpha, g.beta, kernel}, [&] {
    const dnnl::primitive_attr attributes = product_attributes(g);
    const auto pd = onednn::describe("tiled matmul", [&] {
      return dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(block(rows, g.k, lda, g.trans_a), block(g.k, cols, ldb, g.trans_b),
                             block(rows, cols, g.n, false)),
          attributes, onednn::engine());
    });
    const bool sgemm =
        kernel == TileKernel::Auto ? std::string_view(pd.impl_info_str()) == "gemm:jit" : kernel == TileKernel::Sgemm;
    return TileMatmul{pd, sgemm, sgemm ? dnnl::matmul() : dnnl::matmul(pd)};
  });
}

// C = alpha op(A) op(B) + beta C, each tile of C by one thread running a
// oneDNN matmul on one thread: the tiles and their kernels follow from the
// shape alone, so every element is summed in the same order whatever the
// thread count. oneDNN run on all threads at once splits the sum over k
// for some shapes, and the split follows the thread count.
void tiled_gemm(const backend::GemmArgs& g) {
  const Tiling t = tiling(g.batch, g.m, g.n);
  const std::int64_t row_tiles = (g.m + t.rows - 1) / t.rows, col_tiles = (g.n + t.cols - 1) / t.cols;
  const Operand a = readable(stored_a(g), onednn::Slot::ProductA), b = readable(stored_b(g), onednn::Slot::ProductB);
  // The (at most four) tile shapes' matmuls, made before the threads start.
  const std::int64_t last_rows = g.m - (row_tiles - 1) * t.rows, last_cols = g.n - (col_tiles - 1) * t.cols;
  const auto kernel = [&](std::int64_t rows, std::int64_t cols) {
    return tile_matmul_of(g, a.leading, b.leading, rows, cols);
  };
  const std::shared_ptr<const TileMatmul> kernels[2][2] = {{kernel(t.rows, t.cols), kernel(t.rows, last_cols)},
                                                           {kernel(last_rows, t.cols), kernel(last_rows, last_cols)}};
  parallel_tasks(g.batch * row_tiles * col_tiles, [&](std::int64_t tile) {
    const std::int64_t matrix = tile / (row_tiles * col_tiles), i = tile / col_tiles % row_tiles, j = tile % col_tiles;
    const bool last_row = i == row_tiles - 1, last_col = j == col_tiles - 1;
    const TileMatmul& mm = *kernels[last_row][last_col];
    const std::int64_t row = i * t.rows, col = j * t.cols;
    const float* a_tile = a.data + matrix * a.stride + (g.trans_a ? row : row * a.leading);
    const float* b_tile = b.data + matrix * b.stride + (g.trans_b ? col * b.leading : col);
    float* c_tile = g.c + matrix * g.stride_c + row * g.n + col;
    const onednn::OneThread one_thread;
    if (mm.sgemm) {
      const std::int64_t rows = last_row ? last_rows : t.rows, cols = last_col ? last_cols : t.cols;
      const dnnl_status_t status = dnnl_sgemm(g.trans_a ? 'T' : 'N', g.trans_b ? 'T' : 'N', rows, cols, g.k, g.alpha,
                                              a_tile, a.leading, b_tile, b.leading, g.beta, c_tile, g.n);
      DDL_CHECK(status == dnnl_success, "tiled GEMM: oneDNN's sgemm failed on a {}x{}x{} tile (status {})", rows, cols,
                g.k, static_cast<int>(status));
      return;
    }
    const dnnl::engine& engine = onednn::engine();
    run_matmul("tiled matmul", mm.pd, mm.primitive, dnnl::memory(mm.pd.src_desc(), engine, const_cast<float*>(a_tile)),
               dnnl::memory(mm.pd.weights_desc(), engine, const_cast<float*>(b_tile)),
               dnnl::memory(mm.pd.dst_desc(), engine, c_tile));
  });
}

// Whether there are products to compute (not only a C to scale), and
// enough of them for the tiles.
bool computes(const backend::GemmArgs& g) { return g.m > 0 && g.n > 0 && g.batch > 0 && g.k > 0; }
bool large(const backend::GemmArgs& g) { return g.batch * g.m * g.n * g.k >= kTiledMinMultiplyAdds; }

}  // namespace

void set_tile_kernel(TileKernel kernel) { tile_kernel = kernel; }

std::size_t gemm_staging_bytes(const backend::GemmArgs& g) {
  // An upper bound inside a PackedWeights scope, which may read B packed instead.
  if (!computes(g) || config::cpu_precision() == config::CpuPrecision::BFloat16 || !large(g)) return 0;
  return stored_a(g).padded_bytes() + stored_b(g).padded_bytes();
}

void gemm(const backend::GemmArgs& g) {
  if (computes(g)) {
    if (config::cpu_precision() == config::CpuPrecision::BFloat16) return gemm_bf16(g);
    if (gemm_packed(g)) return;
    if (large(g)) return tiled_gemm(g);
  }
  for (std::int64_t i = 0; i < g.batch; ++i) {
    // Stored shapes: A is (k x m) when transposed, B is (n x k) when transposed.
    const ConstMap a(g.a + i * g.stride_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k);
    const ConstMap b(g.b + i * g.stride_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n);
    Map c(g.c + i * g.stride_c, g.m, g.n);
    if (g.k == 0) {  // an empty sum: C = beta * C
      if (g.beta == 0.0f) {
        c.setZero();
      } else {
        c *= g.beta;
      }
      continue;
    }
    if (g.trans_a && g.trans_b) {
      multiply_into(c, a.transpose(), b.transpose(), g.alpha, g.beta);
    } else if (g.trans_a) {
      multiply_into(c, a.transpose(), b, g.alpha, g.beta);
    } else if (g.trans_b) {
      multiply_into(c, a, b.transpose(), g.alpha, g.beta);
    } else {
      multiply_into(c, a, b, g.alpha, g.beta);
    }
  }
}

}  // namespace ddl::cpu_backend
