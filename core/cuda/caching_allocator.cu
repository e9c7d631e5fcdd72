// A caching allocator for device memory, in the spirit of PyTorch's: freed
// blocks go to a per-device pool and are handed out again instead of calling
// cudaFree/cudaMalloc, which synchronise the device and cost microseconds to
// milliseconds each.
//
// Why reuse is safe: every op of a device is queued on that device's single
// stream (stream.hpp), so a block freed by the host after queuing its last
// use is only touched again by work queued later on the same stream. Work on
// other streams (a later communication stream) must synchronise with it
// before its buffers are freed.
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/cuda/stream.hpp>
#include <ddl/core/error.hpp>

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddl::cuda_backend {
namespace {

// Small blocks are rounded to 512 B, large ones to 2 MiB, so a few sizes
// cover many requests and a cached block is at most a little too big.
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = 2 << 20;
constexpr std::size_t kSmallLimit = 1 << 20;

std::size_t round_size(std::size_t bytes) {
  const std::size_t unit = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
  return std::max(unit, (bytes + unit - 1) / unit * unit);
}

class DevicePool {
 public:
  void* allocate(int device, std::size_t bytes) {
    const std::size_t size = round_size(bytes);
    const std::lock_guard lock(mutex_);
    void* data = take_cached(size);
    if (data == nullptr) data = malloc_or_retry(device, size);
    live_[data] = size;
    stats_.bytes_in_use += size;
    stats_.allocations += 1;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
    return data;
  }

  void deallocate(void* data) {
    const std::lock_guard lock(mutex_);
    const auto it = live_.find(data);
    if (it == live_.end()) return;  // not ours: never happens through Storage
    cached_.emplace(it->second, data);
    stats_.bytes_in_use -= it->second;
    stats_.bytes_cached += it->second;
    stats_.allocations -= 1;
    live_.erase(it);
  }

  MemoryStats stats() {
    const std::lock_guard lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    const std::lock_guard lock(mutex_);
    stats_.peak_bytes = stats_.bytes_in_use;
  }

  void release_cache(int device) {
    const std::lock_guard lock(mutex_);
    release_cache_locked(device);
  }

 private:
  // The smallest cached block that fits, if it wastes at most half of itself.
  void* take_cached(std::size_t size) {
    const auto it = cached_.lower_bound(size);
    if (it == cached_.end() || it->first > 2 * size) return nullptr;
    void* data = it->second;
    stats_.bytes_cached -= it->first;
    live_[data] = it->first;  // keeps the block's real size
    cached_.erase(it);
    return data;
  }

  void* malloc_or_retry(int device, std::size_t size) {
    const DeviceGuard guard(device);
    void* data = nullptr;
    if (cudaMalloc(&data, size) == cudaSuccess) return data;
    cudaGetLastError();
    // Out of memory: give the cache back to the driver and try once more.
    release_cache_locked(device);
    const cudaError_t status = cudaMalloc(&data, size);
    if (status != cudaSuccess) {
      throw Error("out of memory on cuda:" + std::to_string(device) + " allocating " + std::to_string(size) +
                  " bytes (" + std::to_string(stats_.bytes_in_use) + " bytes in use): " +
                  cudaGetErrorString(status));
    }
    return data;
  }

  void release_cache_locked(int device) {
    if (cached_.empty()) return;
    const DeviceGuard guard(device);
    DDL_CUDA_CHECK(device, cudaStreamSynchronize(stream(device)));
    for (const auto& [size, data] : cached_) DDL_CUDA_CHECK(device, cudaFree(data));
    cached_.clear();
    stats_.bytes_cached = 0;
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;
  std::unordered_map<void*, std::size_t> live_;
  MemoryStats stats_;
};

DevicePool& pool(int device) {
  static std::vector<DevicePool> pools(static_cast<std::size_t>(device_count()));
  return pools.at(static_cast<std::size_t>(device));
}

}  // namespace

void* allocate(int device, std::size_t bytes) { return pool(device).allocate(device, bytes); }
void deallocate(int device, void* data) { pool(device).deallocate(data); }
MemoryStats memory_stats(int device) { return pool(device).stats(); }
void reset_peak_memory_stats(int device) { pool(device).reset_peak(); }
void empty_cache(int device) { pool(device).release_cache(device); }

}  // namespace ddl::cuda_backend
