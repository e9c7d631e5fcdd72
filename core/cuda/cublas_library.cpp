#include <dlfcn.h>

#include <string>

#include <ddl/core/check.hpp>
#include <ddl/core/cuda/cublas_library.hpp>

namespace ddl::cuda_backend {
namespace {

CublasLibrary open_cublas() {
  // By soname, so the search follows LD_LIBRARY_PATH, then libddl's run path,
  // which holds the CUDA folder libddl was linked against (cudart's).
  const std::string soname = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  void* const library = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    detail::fail(
        "cannot open cuBLAS ({}), which matrix products on a CUDA device need: {}. "
        "Install cuBLAS {} or put its folder on LD_LIBRARY_PATH",
        soname, dlerror(), CUBLAS_VER_MAJOR);
  }
  const auto find = [library, &soname]<typename Function>(Function*& function, const char* name) {
    function = reinterpret_cast<Function*>(dlsym(library, name));
    if (function == nullptr) detail::fail("cuBLAS ({}) has no function {}: {}", soname, name, dlerror());
  };
  CublasLibrary functions{};
  find(functions.create, "cublasCreate_v2");
  find(functions.set_stream, "cublasSetStream_v2");
  find(functions.sgemm_strided_batched, "cublasSgemmStridedBatched");
  find(functions.status_name, "cublasGetStatusName");
  find(functions.status_string, "cublasGetStatusString");
  return functions;  // the library stays open: its handles live until the process ends
}

}  // namespace

const CublasLibrary& cublas() {
  static const CublasLibrary functions = open_cublas();
  return functions;
}

}  // namespace ddl::cuda_backend
