// Device discovery, per-device streams and copies for the CUDA backend.
// A machine without a driver or GPU is normal: discovery reports zero
// devices and the reason, once, and never aborts a CPU-only run.
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/cuda/stream.hpp>

#include <cstdio>
#include <mutex>
#include <vector>

namespace ddl::cuda_backend {
namespace {

struct Discovery {
  int count = 0;
  std::string reason;
};

const Discovery& discovery() {
  static const Discovery found = [] {
    Discovery d;
    const cudaError_t status = cudaGetDeviceCount(&d.count);
    if (status != cudaSuccess) {
      d.count = 0;
      d.reason = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
      cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    } else if (d.count == 0) {
      d.reason = "the driver reports no CUDA device";
    }
    if (d.count == 0) std::fprintf(stderr, "ddl: no CUDA device (%s); running on CPU only\n", d.reason.c_str());
    return d;
  }();
  return found;
}

}  // namespace

int device_count() { return discovery().count; }

std::string unavailable_reason() { return discovery().reason; }

cudaStream_t stream(int device) {
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  const std::lock_guard lock(mutex);
  if (streams.empty()) streams.assign(static_cast<std::size_t>(device_count()), nullptr);
  cudaStream_t& s = streams.at(static_cast<std::size_t>(device));
  if (s == nullptr) {
    const DeviceGuard guard(device);
    DDL_CUDA_CHECK(device, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return s;
}

DeviceGuard::DeviceGuard(int device) {
  DDL_CUDA_CHECK(device, cudaGetDevice(&previous_));
  if (previous_ != device) DDL_CUDA_CHECK(device, cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() { cudaSetDevice(previous_); }

void copy(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice: {
      // Pageable host memory: the copy is staged, then we wait so the caller
      // may free the host buffer on return.
      const DeviceGuard guard(dst_device);
      DDL_CUDA_CHECK(dst_device, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream(dst_device)));
      DDL_CUDA_CHECK(dst_device, cudaStreamSynchronize(stream(dst_device)));
      break;
    }
    case CopyKind::DeviceToHost: {
      const DeviceGuard guard(src_device);
      DDL_CUDA_CHECK(src_device, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream(src_device)));
      DDL_CUDA_CHECK(src_device, cudaStreamSynchronize(stream(src_device)));
      break;
    }
    case CopyKind::DeviceToDevice: {
      if (src_device == dst_device) {
        const DeviceGuard guard(dst_device);
        DDL_CUDA_CHECK(dst_device, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(dst_device)));
      } else {
        // The source must be complete before another device reads it.
        synchronize(src_device);
        const DeviceGuard guard(dst_device);
        DDL_CUDA_CHECK(dst_device,
                       cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream(dst_device)));
      }
      break;
    }
  }
}

void fill_zero(int device, void* data, std::size_t bytes) {
  const DeviceGuard guard(device);
  DDL_CUDA_CHECK(device, cudaMemsetAsync(data, 0, bytes, stream(device)));
}

void synchronize(int device) {
  const DeviceGuard guard(device);
  DDL_CUDA_CHECK(device, cudaStreamSynchronize(stream(device)));
}

}  // namespace ddl::cuda_backend
