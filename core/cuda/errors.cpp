#include <ddl/core/check.hpp>
#include <ddl/core/cuda/errors.hpp>

namespace ddl::cuda_backend {

void fail_call(const char* call, int device, const char* error_name, const char* error_text, const char* file,
               int line) {
  detail::fail("{} failed on cuda:{}: {} ({}) at {}:{}", call, device, error_name, error_text, file, line);
}

}  // namespace ddl::cuda_backend
