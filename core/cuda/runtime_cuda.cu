// Device discovery, per-device streams and launch limits, and copies for
// the CUDA backend.
// A machine without a driver or GPU is normal: discovery reports zero
// devices and the reason, once, and never aborts a CPU-only run.
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/host_upload.hpp>
#include <ddl/core/cuda/launch.cuh>
#include <ddl/core/cuda/per_device.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <cstdio>
#include <mutex>
#include <set>
#include <utility>

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

// Lets `device` read and write `peer`'s memory directly (NVLink or PCIe
// peer-to-peer) where the hardware allows, once per pair; elsewhere
// cudaMemcpyPeerAsync stages through host memory by itself.
void enable_peer_access(int device, int peer) {
  static std::mutex mutex;
  static std::set<std::pair<int, int>> tried;
  const std::lock_guard lock(mutex);
  if (!tried.insert({device, peer}).second) return;
  int possible = 0;
  DDL_CUDA_CHECK(device, cudaDeviceCanAccessPeer(&possible, device, peer));
  if (possible == 0) return;
  const DeviceGuard guard(device);
  const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // someone else enabled it: fine, and not a sticky error
    return;
  }
  DDL_CUDA_CHECK(device, status);
}

// Makes `waiting` wait, on the GPU and without blocking the host, for the
// work queued on `done` so far; the streams may be on different devices.
void stream_wait(Stream waiting, Stream done) {
  cudaEvent_t event = nullptr;
  {
    const DeviceGuard guard(done.device);
    DDL_CUDA_CHECK(done.device, cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    DDL_CUDA_CHECK(done.device, cudaEventRecord(event, done.handle));
  }
  const DeviceGuard guard(waiting.device);
  const cudaError_t status = cudaStreamWaitEvent(waiting.handle, event, 0);
  cudaEventDestroy(event);  // released once the wait is satisfied
  DDL_CUDA_CHECK(waiting.device, status);
}

}  // namespace

int device_count() { return discovery().count; }

std::string unavailable_reason() { return discovery().reason; }

std::string device_uuid(int device) {
  cudaDeviceProp properties{};
  DDL_CUDA_CHECK(device, cudaGetDeviceProperties(&properties, device));
  const auto* b = reinterpret_cast<const unsigned char*>(properties.uuid.bytes);
  char text[48];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

Stream stream(int device) {
  static PerDevice<cudaStream_t> streams([](int d) {
    cudaStream_t created = nullptr;
    DDL_CUDA_CHECK(d, cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  });
  return {device, streams.get(device)};
}

int max_grid_blocks(int device) {
  static PerDevice<int> blocks([](int d) {
    int sms = 0;
    DDL_CUDA_CHECK(d, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
    return sms * 32;
  });
  return blocks.get(device);
}

namespace {
// Whether ddl has made a device current on this thread yet.
thread_local bool thread_has_device = false;
}  // namespace

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  DDL_CUDA_CHECK(device, cudaGetDevice(&current));
  // A thread's first device stays current unless the thread had chosen
  // another one itself (a current device other than the default 0): going
  // back to 0 would make a context on GPU 0 (cudaSetDevice creates it since
  // CUDA 12) in every process of a node, and fails outright where GPU 0 is
  // in EXCLUSIVE_PROCESS mode and another process holds it.
  const bool first_here = !thread_has_device && current == 0;
  if (current != device) DDL_CUDA_CHECK(device, cudaSetDevice(device));
  thread_has_device = true;  // only once the switch has worked
  previous_ = first_here ? device : current;
  switched_ = previous_ != device;
}

DeviceGuard::~DeviceGuard() {
  if (!switched_) return;
  const cudaError_t status = cudaSetDevice(previous_);
  if (status != cudaSuccess) {
    // A destructor cannot throw; the error is cleared so that it does not
    // surface at an unrelated later call, and said here instead.
    (void)cudaGetLastError();
    std::fprintf(stderr, "ddl: could not make cuda:%d current again: %s\n", previous_, cudaGetErrorString(status));
  }
}

void copy(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice:
      upload(dst_device, dst, src, bytes);
      break;
    case CopyKind::DeviceToHost: {
      const DeviceGuard guard(src_device);
      const cudaStream_t queue = stream(src_device).handle;
      DDL_CUDA_CHECK(src_device, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, queue));
      DDL_CUDA_CHECK(src_device, cudaStreamSynchronize(queue));
      break;
    }
    case CopyKind::DeviceToDevice: {
      if (src_device == dst_device) {
        const DeviceGuard guard(dst_device);
        DDL_CUDA_CHECK(dst_device,
                       cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(dst_device).handle));
      } else {
        // A copy between GPUs (layer placement) is ordered against both
        // streams: it starts after the work that writes the source, and the
        // source's stream waits for it before running anything later. Each
        // device's allocator reuses a freed block in its own stream's order,
        // so the source's memory is not handed out again while the copy
        // still reads it, and the destination's stream sees the data.
        enable_peer_access(dst_device, src_device);
        stream_wait(stream(dst_device), stream(src_device));
        {
          const DeviceGuard guard(dst_device);
          DDL_CUDA_CHECK(dst_device,
                         cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream(dst_device).handle));
        }
        stream_wait(stream(src_device), stream(dst_device));
      }
      break;
    }
  }
}

void fill_zero(Stream stream, void* data, std::size_t bytes) {
  const DeviceGuard guard(stream.device);
  DDL_CUDA_CHECK(stream.device, cudaMemsetAsync(data, 0, bytes, stream.handle));
}

void synchronize(int device) {
  const DeviceGuard guard(device);
  DDL_CUDA_CHECK(device, cudaStreamSynchronize(stream(device).handle));
}

}  // namespace ddl::cuda_backend
