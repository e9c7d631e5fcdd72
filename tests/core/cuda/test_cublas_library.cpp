// cuBLAS is opened by name at the first GPU GEMM (core/cuda/cublas_library.hpp).
// Opening it and finding its functions needs no GPU, so this runs in every
// CUDA build; that a CPU run never maps it is ddl-train's cpu-libraries case.
#include <doctest/doctest.h>

#include <ddl/core/cuda/cublas_library.hpp>

#include <fstream>
#include <string>

namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(library) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("cuBLAS: opened on first use, every function found, once") {
  const ddl::cuda_backend::CublasLibrary& library = ddl::cuda_backend::cublas();
  CHECK(static_cast<bool>(library.create));
  CHECK(static_cast<bool>(library.set_stream));
  CHECK(static_cast<bool>(library.sgemm_strided_batched));
  REQUIRE(static_cast<bool>(library.status_name));
  REQUIRE(static_cast<bool>(library.status_string));
  // Calls through the table reach the library ddl was built against.
  CHECK(std::string(library.status_name(CUBLAS_STATUS_NOT_INITIALIZED)) == "CUBLAS_STATUS_NOT_INITIALIZED");
  CHECK(!std::string(library.status_string(CUBLAS_STATUS_INVALID_VALUE)).empty());
  CHECK(mapped("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)));
  CHECK(&ddl::cuda_backend::cublas() == &library);
}
