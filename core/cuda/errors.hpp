// Turns a failed CUDA call into a ddl::Error naming the call, the device, the
// library's error name and text, and where it happened (cuBLAS's calls:
// cublas_library.hpp). Included by the .cu files; the message is built in
// errors.cpp with fmt so nvcc never compiles fmt.
#pragma once

namespace ddl::cuda_backend {

[[noreturn]] void fail_call(const char* call, int device, const char* error_name, const char* error_text,
                            const char* file, int line);

}  // namespace ddl::cuda_backend

// Evaluates a cudaError_t expression once; throws unless it is cudaSuccess.
#define DDL_CUDA_CHECK(device, call)                                                                        \
  do {                                                                                                      \
    const cudaError_t ddl_status_ = (call);                                                                 \
    if (ddl_status_ != cudaSuccess) {                                                                       \
      ::ddl::cuda_backend::fail_call(#call, (device), cudaGetErrorName(ddl_status_),                        \
                                     cudaGetErrorString(ddl_status_), __FILE__, __LINE__);                  \
    }                                                                                                       \
  } while (false)
