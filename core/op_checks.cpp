#include <ddl/core/check.hpp>
#include <ddl/core/op_checks.hpp>

namespace ddl {

void require_float(const Tensor& x, const char* op) {
  DDL_CHECK(x.defined(), "{}: input tensor is undefined", op);
  DDL_CHECK(x.dtype() == DType::Float32, "{}: expected a float32 tensor, got {} of shape {}", op, x.dtype(), x.shape());
}

void require_same_device(const Tensor& a, const Tensor& b, const char* op) {
  DDL_CHECK(a.device() == b.device(), "{}: tensors are on different devices ({} with shape {}, {} with shape {})", op,
            a.device(), a.shape(), b.device(), b.shape());
}

}  // namespace ddl
