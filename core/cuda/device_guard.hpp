// Internal to the CUDA backend: makes a device current for a scope, as every
// CUDA runtime and library call on that device needs, and restores the
// previous one.
#pragma once

#include <cuda_runtime.h>

namespace ddl::cuda_backend {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace ddl::cuda_backend
