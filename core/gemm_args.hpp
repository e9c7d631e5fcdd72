// Arguments of one (batched) GEMM call, shared by the CPU and CUDA backends.
#pragma once

#include <cstdint>

namespace ddl::backend {

// Row-major C = alpha * op(A) @ op(B) + beta * C for `batch` matrices at the
// given element strides; op transposes when trans_* is set. A is m x k after
// op, B is k x n after op, C is m x n.
struct GemmArgs {
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  const float* b = nullptr;
  float* c = nullptr;
  std::int64_t batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

}  // namespace ddl::backend
