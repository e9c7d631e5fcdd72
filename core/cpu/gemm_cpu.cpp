// CPU GEMM through Eigen: the row-major buffers are mapped, not copied, and
// Eigen's blocked, multi-threaded product does the work.
#include <ddl/core/backend.hpp>

#include <Eigen/Core>

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
    c *= beta;
    c.noalias() += alpha * (lhs * rhs);
  }
}

}  // namespace

void gemm(const backend::GemmArgs& g) {
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
