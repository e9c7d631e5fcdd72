// cuBLAS, opened at the first GPU GEMM instead of linked. Linking libcublas
// maps libcublasLt (540 MB) into every process that loads libddl, with a GPU
// or without: its start-up (relocations, about 26,000 page faults) cost each
// process 0.12 s here, so ddl-train on a CPU and every test process paid for a
// library they never call. ddl calls five of its functions; they are looked up
// by name once (TensorFlow loads all of CUDA this way).
#pragma once

#include <cublas_v2.h>

#include <ddl/core/cuda/errors.hpp>

namespace ddl::cuda_backend {

struct CublasLibrary {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// Opens libcublas.so.<the major version ddl was built against> on the first
// call (thread-safe) and keeps it open. Throws ddl::Error naming the library
// and the loader's reason where it cannot be opened or lacks a function.
const CublasLibrary& cublas();

}  // namespace ddl::cuda_backend

// Evaluates a cublasStatus_t expression once; throws unless it is success.
#define DDL_CUBLAS_CHECK(device, call)                                                            \
  do {                                                                                            \
    const cublasStatus_t ddl_status_ = (call);                                                    \
    if (ddl_status_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      const ::ddl::cuda_backend::CublasLibrary& ddl_cublas_ = ::ddl::cuda_backend::cublas();      \
      ::ddl::cuda_backend::fail_call(#call, (device), ddl_cublas_.status_name(ddl_status_),       \
                                     ddl_cublas_.status_string(ddl_status_), __FILE__, __LINE__); \
    }                                                                                             \
  } while (false)
