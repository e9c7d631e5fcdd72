// GEMM on cuBLAS. cuBLAS is column-major and our tensors row-major; a
// row-major C = A B is the column-major C^T = B^T A^T, so the operands are
// passed swapped and no data is transposed.
#include <ddl/core/cuda/cublas_library.hpp>
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/per_device.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <algorithm>
#include <climits>

namespace ddl::cuda_backend {
namespace {

// The device's cuBLAS handle, queuing on `stream`.
cublasHandle_t cublas_handle(Stream stream) {
  static PerDevice<cublasHandle_t> handles([](int device) {
    cublasHandle_t created = nullptr;
    DDL_CUBLAS_CHECK(device, cublas().create(&created));
    return created;
  });
  const cublasHandle_t handle = handles.get(stream.device);
  DDL_CUBLAS_CHECK(stream.device, cublas().set_stream(handle, stream.handle));
  return handle;
}

int checked_int(std::int64_t value, const char* what, int device) {
  if (value > INT_MAX) {
    fail_call("cublasSgemmStridedBatched", device, "size too large", what, __FILE__, __LINE__);
  }
  return static_cast<int>(value);
}

}  // namespace

void gemm(Stream stream, const backend::GemmArgs& g) {
  const int device = stream.device;
  const DeviceGuard guard(device);
  const int m = checked_int(g.m, "m exceeds INT_MAX", device);
  const int n = checked_int(g.n, "n exceeds INT_MAX", device);
  const int k = checked_int(g.k, "k exceeds INT_MAX", device);
  const int batch = checked_int(g.batch, "batch exceeds INT_MAX", device);
  // Leading dimensions are the row lengths of the stored row-major matrices.
  // cuBLAS refuses one below 1 even where a dimension is 0 and nothing is
  // read (an empty inner dimension: C = beta C, zeros here, as on the CPU).
  const int lda = std::max(1, g.trans_a ? m : k);
  const int ldb = std::max(1, g.trans_b ? k : n);
  const int ldc = std::max(1, n);
  DDL_CUBLAS_CHECK(
      device, cublas().sgemm_strided_batched(cublas_handle(stream), g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                             g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &g.alpha, g.b, ldb,
                                             g.stride_b, g.a, lda, g.stride_a, &g.beta, g.c, ldc, g.stride_c, batch));
}

}  // namespace ddl::cuda_backend
