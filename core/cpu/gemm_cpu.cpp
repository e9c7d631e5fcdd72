// CPU GEMM through Eigen: the row-major buffers are mapped, not copied, and
// Eigen's blocked, multi-threaded product does the work. Under bf16 mixed
// precision (config::cpu_precision()) oneDNN's matmul does it instead, on
// operands rounded to bfloat16, summing in float32; and so it does x·op(W)
// for a weight W that a PackedWeights scope holds, reading the copy of W
// packed for it once (packed_weights.hpp).
#include <ddl/core/backend.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cpu/onednn.hpp>
#include <ddl/core/packed_weights.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <Eigen/Core>

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

// One bf16 GEMM shape's matmul, created once and shared by every thread.
struct Matmul {
  dnnl::memory::desc a_user, b_user, c;  // the float32 operands as the caller lays them out
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

Matmul make_matmul(const backend::GemmArgs& g) {
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  const memory::desc a_user = operand(g.batch, g.stride_a, g.m, g.k, g.trans_a, f32);
  const memory::desc b_user = operand(g.batch, g.stride_b, g.k, g.n, g.trans_b, f32);
  const memory::desc c = operand(g.batch, g.stride_c, g.m, g.n, false, f32);
  dnnl::primitive_attr attributes = onednn::user_scratchpad();
  attributes.set_output_scales(0, {g.alpha});
  if (g.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(g.beta);
    attributes.set_post_ops(sum);
  }
  const auto bf16 = [](const memory::desc& d) {
    return memory::desc(d.dims(), memory::data_type::bf16, memory::format_tag::any);
  };
  const auto pd = onednn::describe("bf16 matmul", [&] {
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(bf16(a_user), bf16(b_user), c), attributes,
                                        onednn::engine());
  });
  return {a_user, b_user, c, pd, dnnl::matmul(pd)};
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

}  // namespace

void gemm(const backend::GemmArgs& g) {
  const bool empty = g.m == 0 || g.n == 0 || g.batch == 0;  // nothing to compute
  if (!empty && g.k > 0 && config::cpu_precision() == config::CpuPrecision::BFloat16) return gemm_bf16(g);
  if (!empty && g.k > 0 && gemm_packed(g)) return;
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
