// GEMM on cuBLAS. cuBLAS is column-major and our tensors row-major; a
// row-major C = A B is the column-major C^T = B^T A^T, so the operands are
// passed swapped and no data is transposed.
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/stream.hpp>

#include <cublas_v2.h>

#include <climits>
#include <mutex>
#include <vector>

namespace ddl::cuda_backend {
namespace {

cublasHandle_t handle(int device) {
  static std::mutex mutex;
  static std::vector<cublasHandle_t> handles(static_cast<std::size_t>(device_count()), nullptr);
  const std::lock_guard lock(mutex);
  cublasHandle_t& h = handles.at(static_cast<std::size_t>(device));
  if (h == nullptr) {
    DDL_CUBLAS_CHECK(device, cublasCreate(&h));
    DDL_CUBLAS_CHECK(device, cublasSetStream(h, stream(device)));
  }
  return h;
}

int checked_int(std::int64_t value, const char* what, int device) {
  if (value > INT_MAX) {
    fail_call("cublasSgemmStridedBatched", device, "size too large", what, __FILE__, __LINE__);
  }
  return static_cast<int>(value);
}

}  // namespace

void gemm(int device, const backend::GemmArgs& g) {
  const DeviceGuard guard(device);
  const int m = checked_int(g.m, "m exceeds INT_MAX", device);
  const int n = checked_int(g.n, "n exceeds INT_MAX", device);
  const int k = checked_int(g.k, "k exceeds INT_MAX", device);
  const int batch = checked_int(g.batch, "batch exceeds INT_MAX", device);
  // Leading dimensions are the row lengths of the stored row-major matrices.
  const int lda = g.trans_a ? m : k;
  const int ldb = g.trans_b ? k : n;
  DDL_CUBLAS_CHECK(device, cublasSgemmStridedBatched(handle(device), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                     g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &g.alpha, g.b,
                                                     ldb, g.stride_b, g.a, lda, g.stride_a, &g.beta, g.c, n,
                                                     g.stride_c, batch));
}

}  // namespace ddl::cuda_backend
