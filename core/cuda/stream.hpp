// Internal to the CUDA backend: the one stream each device's ops are queued
// on, and a guard that makes a device current for a scope. Every kernel
// launch, copy and library call names this stream explicitly.
#pragma once

#include <cuda_runtime.h>

namespace ddl::cuda_backend {

cudaStream_t stream(int device);

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
