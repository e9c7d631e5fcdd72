// The input checks every op shares, public so that ops written outside core
// (layers, losses, optimizers) fail with the same messages as core's own:
// each names the op and the offending tensors' shapes, dtypes or devices.
#pragma once

#include <ddl/core/tensor.hpp>

namespace ddl {

// x is defined and float32.
void require_float(const Tensor& x, const char* op);
// a and b are on the same device.
void require_same_device(const Tensor& a, const Tensor& b, const char* op);

}  // namespace ddl
