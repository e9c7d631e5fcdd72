// Index kernels: small structs whose operator()(i) computes element i of a
// result. The same struct runs in the CPU's parallel loop and in the CUDA
// grid-stride kernel (cuda/launch.cuh), so the CPU tests check the GPU's
// arithmetic too. Pointers are device pointers of the tensor's device.
#pragma once

#include <cstdint>

#include <ddl/core/functors.hpp>
#include <ddl/core/kernel_list.hpp>
#include <ddl/core/log_sum_exp.hpp>
#include <ddl/core/macros.hpp>
#include <ddl/core/random.hpp>
#include <ddl/core/shape.hpp>

namespace ddl::kernels {

using Index = std::int64_t;

// Maps an index of the broadcast result to the index of one operand.
struct BroadcastIndex {
  enum Mode : int { kSame, kScalar, kGeneral };
  Mode mode = kSame;
  int rank = 0;
  Index out_dims[Shape::kMaxDims] = {};
  Index in_strides[Shape::kMaxDims] = {};  // 0 along broadcast dims

  static BroadcastIndex make(const Shape& in, const Shape& out);

  DDL_HOST_DEVICE Index operator()(Index i) const {
    if (mode == kSame) return i;
    if (mode == kScalar) return 0;
    Index offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (i % out_dims[d]) * in_strides[d];
      i /= out_dims[d];
    }
    return offset;
  }
};

template <class Op>
struct Map1 {
  const float* x;
  float* y;
  Op op;
  DDL_HOST_DEVICE void operator()(Index i) const { y[i] = op(x[i]); }
};

template <class Op>
struct Map2 {
  const float* a;
  const float* b;
  float* y;
  BroadcastIndex index_a;
  BroadcastIndex index_b;
  Op op;
  DDL_HOST_DEVICE void operator()(Index i) const { y[i] = op(a[index_a(i)], b[index_b(i)]); }
};

// Map2 for operands of the result's own shape: no index arithmetic, so the
// CPU loop vectorises. The common case (every backward of an activation).
template <class Op>
struct Zip2 {
  const float* a;
  const float* b;
  float* y;
  Op op;
  DDL_HOST_DEVICE void operator()(Index i) const { y[i] = op(a[i], b[i]); }
};

// y = x broadcast to y's shape.
struct BroadcastCopy {
  const float* x;
  float* y;
  BroadcastIndex index;
  DDL_HOST_DEVICE void operator()(Index i) const { y[i] = x[index(i)]; }
};

template <class T>
struct FillValue {
  T* y;
  T value;
  DDL_HOST_DEVICE void operator()(Index i) const { y[i] = value; }
};

template <class T>
struct Arange {
  T* y;
  T start;
  T step;
  DDL_HOST_DEVICE void operator()(Index i) const { y[i] = start + static_cast<T>(i) * step; }
};

// A tensor reduced along one dim is viewed as [outer, n, inner]; output j
// is lane (j / inner, j % inner), and the lane's elements are inner apart.
struct Lanes {
  Index n;
  Index inner;
  DDL_HOST_DEVICE Index first(Index j) const { return (j / inner) * n * inner + j % inner; }
};

// Sums each lane, accumulating in double so long lanes stay accurate.
struct SumLanes {
  const float* x;
  float* y;
  Lanes lanes;
  DDL_HOST_DEVICE void operator()(Index j) const {
    const float* p = x + lanes.first(j);
    double total = 0.0;
    for (Index k = 0; k < lanes.n; ++k) total += p[k * lanes.inner];
    y[j] = static_cast<float>(total);
  }
};

// Max of each lane and its position (the first one on ties, as NumPy).
struct MaxLanes {
  const float* x;
  float* values;
  std::int64_t* indices;
  Lanes lanes;
  DDL_HOST_DEVICE void operator()(Index j) const {
    const float* p = x + lanes.first(j);
    Index best = 0;
    for (Index k = 1; k < lanes.n; ++k) {
      if (p[k * lanes.inner] > p[best * lanes.inner]) best = k;
    }
    values[j] = p[best * lanes.inner];
    indices[j] = best;
  }
};

// Writes g[j] at each lane's recorded position (grad_in pre-zeroed).
struct ScatterLanes {
  const float* g;
  const std::int64_t* indices;
  float* grad_in;
  Lanes lanes;
  DDL_HOST_DEVICE void operator()(Index j) const { grad_in[lanes.first(j) + indices[j] * lanes.inner] = g[j]; }
};

// Softmax (or log-softmax) of each lane, max-shifted for stability.
struct SoftmaxLanes {
  const float* x;
  float* y;
  Lanes lanes;
  bool take_log;
  DDL_HOST_DEVICE void operator()(Index j) const {
    const Index base = lanes.first(j), step = lanes.inner;
    const LaneLogSumExp lse = lane_log_sum_exp(x + base, lanes.n, step);
    for (Index k = 0; k < lanes.n; ++k) {
      const double log_p = lse.log_probability(x[base + k * step]);
      y[base + k * step] = static_cast<float>(take_log ? log_p : ::exp(log_p));
    }
  }
};

// Backward of SoftmaxLanes from its output y:
//   softmax:     dx = y * (g - sum(g * y))
//   log-softmax: dx = g - exp(y) * sum(g)
struct SoftmaxGradLanes {
  const float* y;
  const float* g;
  float* grad_in;
  Lanes lanes;
  bool take_log;
  DDL_HOST_DEVICE void operator()(Index j) const {
    const Index base = lanes.first(j), step = lanes.inner;
    double dot = 0.0;
    for (Index k = 0; k < lanes.n; ++k) {
      const Index at = base + k * step;
      dot += take_log ? g[at] : g[at] * y[at];
    }
    const float s = static_cast<float>(dot);
    for (Index k = 0; k < lanes.n; ++k) {
      const Index at = base + k * step;
      grad_in[at] = take_log ? g[at] - expf(y[at]) * s : y[at] * (g[at] - s);
    }
  }
};

// y[b, c, r] = x[b, r, c] for x of shape [batch, rows, cols].
struct TransposeLast2 {
  const float* x;
  float* y;
  Index rows;
  Index cols;
  DDL_HOST_DEVICE void operator()(Index i) const {
    const Index r = i % rows;
    const Index c = (i / rows) % cols;
    const Index b = i / (rows * cols);
    y[i] = x[(b * rows + r) * cols + c];
  }
};

// A block of columns of a row-major [rows, ...] matrix copied into another's:
// row r's `width` values from column src_column of x go to column
// dst_column of y (what slicing or joining along a dim other than 0 is,
// with rows = the product of the dims before it). Element i is row
// i / width.
struct CopyColumns {
  const float* x;
  float* y;
  Index width;
  Index x_cols, src_column;
  Index y_cols, dst_column;
  DDL_HOST_DEVICE void operator()(Index i) const {
    const Index r = i / width, c = i % width;
    y[r * y_cols + dst_column + c] = x[r * x_cols + src_column + c];
  }
};

// Element i uses Philox counter offset + i, so results do not depend on
// how elements are split among threads or GPU blocks.
struct UniformFill {
  float* y;
  std::uint64_t seed;
  std::uint64_t offset;
  float low;
  float high;
  DDL_HOST_DEVICE void operator()(Index i) const {
    const Philox4x32 bits(offset + static_cast<std::uint64_t>(i), seed);
    y[i] = low + (high - low) * (1.0f - uint_to_unit_float(bits.out[0]));
  }
};

// Box-Muller on two uniforms from the same Philox block.
struct NormalFill {
  float* y;
  std::uint64_t seed;
  std::uint64_t offset;
  float mean;
  float stddev;
  DDL_HOST_DEVICE void operator()(Index i) const {
    const Philox4x32 bits(offset + static_cast<std::uint64_t>(i), seed);
    const float u1 = uint_to_unit_float(bits.out[0]);
    const float u2 = uint_to_unit_float(bits.out[1]);
    const float radius = sqrtf(-2.0f * logf(u1));
    constexpr float kTwoPi = 6.28318530717958647692f;
    y[i] = mean + stddev * radius * cosf(kTwoPi * u2);
  }
};

}  // namespace ddl::kernels

// clang-format off
// Arithmetic on two operands of broadcastable shapes: F(X, Op) for each,
// launched as Map2<Op> (broadcast operands) and Zip2<Op> (same shapes).
#define DDL_ARITHMETIC_FUNCTORS(F, X) F(X, fn::Add) F(X, fn::Sub) F(X, fn::Mul) F(X, fn::Div)
#define DDL_MAP2_AND_ZIP2(X, Op) X(Map2<Op>) X(Zip2<Op>)
// The backward of a unary op takes the tensor it saved and a gradient of the
// same shape: Zip2 only.
#define DDL_UNARY_GRAD_KERNELS(X)                                                                      \
  X(Zip2<fn::ReluGrad>) X(Zip2<fn::AbsGrad>) X(Zip2<fn::SigmoidGrad>) X(Zip2<fn::TanhGrad>)          \
  X(Zip2<fn::SqrtGrad>) X(Zip2<fn::PowGrad>)

// Every kernel the core launches (kernel_list.hpp), named relative to
// ddl::kernels.
#define DDL_CORE_KERNELS(X)                                                                             \
  X(Map1<fn::Neg>) X(Map1<fn::Exp>) X(Map1<fn::Log>) X(Map1<fn::Sqrt>) X(Map1<fn::Relu>) X(Map1<fn::Abs>) \
  X(Map1<fn::Tanh>) X(Map1<fn::Sigmoid>) X(Map1<fn::AddScalar>) X(Map1<fn::MulScalar>)                  \
  X(Map1<fn::PowScalar>) X(BroadcastCopy) X(FillValue<float>)                                           \
  X(FillValue<std::int32_t>) X(FillValue<std::int64_t>) X(Arange<float>) X(Arange<std::int32_t>)        \
  X(Arange<std::int64_t>) X(SumLanes) X(MaxLanes) X(ScatterLanes) X(SoftmaxLanes) X(SoftmaxGradLanes)   \
  X(TransposeLast2) X(CopyColumns) X(UniformFill) X(NormalFill) DDL_ARITHMETIC_FUNCTORS(DDL_MAP2_AND_ZIP2, X)           \
  DDL_UNARY_GRAD_KERNELS(X)
// clang-format on

namespace ddl::kernels {
DDL_CORE_KERNELS(DDL_LIST_KERNEL)
}  // namespace ddl::kernels
