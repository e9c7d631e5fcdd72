// upload() (host_upload.hpp) on the CUDA runtime.
#include <ddl/core/cuda/host_upload.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>

#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/per_device.hpp>
#include <ddl/core/cuda/runtime.hpp>

namespace ddl::cuda_backend {
namespace {

struct Chunk {
  void* host = nullptr;        // kUploadChunkBytes, page-locked
  cudaEvent_t sent = nullptr;  // on the compute stream, after the chunk's last transfer
};

struct Ring {
  std::mutex mutex;  // one upload at a time writes the chunks
  std::array<Chunk, kUploadChunks> chunks{};
  std::size_t next = 0;

  Ring() = default;
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  // Runs only when make_ring fails part way (a made ring is never freed):
  // gives back what was taken, errors ignored as in any destructor.
  ~Ring() {
    for (const Chunk& chunk : chunks) {
      if (chunk.sent != nullptr) cudaEventDestroy(chunk.sent);
      if (chunk.host != nullptr) cudaFreeHost(chunk.host);
    }
  }
};

// Made with the device current (PerDevice) and never freed: like the
// device's stream, it lives as long as the CUDA context it belongs to.
Ring* make_ring(int device) {
  auto ring = std::make_unique<Ring>();
  for (Chunk& chunk : ring->chunks) {
    DDL_CUDA_CHECK(device, cudaHostAlloc(&chunk.host, kUploadChunkBytes, cudaHostAllocDefault));
    DDL_CUDA_CHECK(device, cudaEventCreateWithFlags(&chunk.sent, cudaEventDisableTiming));
  }
  return ring.release();
}

}  // namespace

void upload(int device, void* target, const void* source, std::size_t bytes) {
  static PerDevice<Ring*> rings(make_ring);
  Ring& ring = *rings.get(device);
  const cudaStream_t queue = stream(device).handle;
  const std::lock_guard lock(ring.mutex);
  const DeviceGuard guard(device);
  for (std::size_t offset = 0; offset < bytes; offset += kUploadChunkBytes) {
    const std::size_t piece = std::min(kUploadChunkBytes, bytes - offset);
    Chunk& chunk = ring.chunks[ring.next];
    ring.next = (ring.next + 1) % ring.chunks.size();
    // A chunk never sent yet has an event never recorded, which is complete.
    DDL_CUDA_CHECK(device, cudaEventSynchronize(chunk.sent));
    std::memcpy(chunk.host, static_cast<const std::byte*>(source) + offset, piece);
    DDL_CUDA_CHECK(device, cudaMemcpyAsync(static_cast<std::byte*>(target) + offset, chunk.host, piece,
                                           cudaMemcpyHostToDevice, queue));
    DDL_CUDA_CHECK(device, cudaEventRecord(chunk.sent, queue));
  }
}

}  // namespace ddl::cuda_backend
