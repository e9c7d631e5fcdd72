// Internal to the CUDA backend: makes a device current for a scope, as every
// CUDA runtime and library call on that device needs, and restores the
// previous one; but the first device ddl uses on a thread stays current
// there, unless the thread had made another one current itself. So a rank
// that computes on cuda:3 runs on cuda:3 alone, its communication thread
// too, and never touches GPU 0.
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
  bool switched_ = false;
};

}  // namespace ddl::cuda_backend
