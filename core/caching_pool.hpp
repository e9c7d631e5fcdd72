// Internal: the block cache behind both allocators (CPU and CUDA). Freed
// blocks are kept per device in a size-ordered pool and handed out again, so
// steady-state training allocates nothing from the system: on the GPU that
// avoids cudaMalloc/cudaFree (which synchronise); on the CPU it avoids the
// page faults of freshly mapped memory, which for multi-MiB activations cost
// more than the ops that fill them.
//
// Backend provides: static void* raw_allocate(int device, std::size_t bytes)
// (nullptr when out of memory), static void raw_free(int device, void*), and
// static void before_release(int device) (e.g. wait for queued GPU work).
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include <ddl/core/allocator.hpp>

namespace ddl::detail {

template <class Backend>
class CachingPool {
 public:
  // Small blocks are rounded to 512 B, large ones to 2 MiB, so a few sizes
  // cover many requests; a cached block is reused when at most 2x too big.
  static std::size_t round_size(std::size_t bytes) {
    constexpr std::size_t kSmallRound = 512, kLargeRound = 2 << 20, kSmallLimit = 1 << 20;
    const std::size_t unit = bytes <= kSmallLimit ? kSmallRound : kLargeRound;
    return std::max(unit, (bytes + unit - 1) / unit * unit);
  }

  // Returns nullptr when the backend is out of memory even after the cache
  // was given back; the caller raises the error with its context.
  void* allocate(int device, std::size_t bytes) {
    const std::size_t size = round_size(bytes);
    const std::lock_guard lock(mutex_);
    void* data = take_cached(size);
    if (data == nullptr) data = raw(device, size);
    if (data == nullptr) {
      release_locked(device);
      data = raw(device, size);
    }
    if (data == nullptr) return nullptr;
    live_[data] = bytes;
    stats_.bytes_in_use += bytes;
    stats_.allocations += 1;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
    return data;
  }

  void deallocate(void* data) {
    const std::lock_guard lock(mutex_);
    const auto it = live_.find(data);
    if (it == live_.end()) return;  // not ours: never happens through Storage
    const std::size_t block = block_sizes_.at(data);
    cached_.emplace(block, data);
    stats_.bytes_in_use -= it->second;
    stats_.bytes_cached += block;
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
    release_locked(device);
  }

 private:
  void* take_cached(std::size_t size) {
    const auto it = cached_.lower_bound(size);
    if (it == cached_.end() || it->first > 2 * size) return nullptr;
    void* data = it->second;
    stats_.bytes_cached -= it->first;
    cached_.erase(it);
    return data;
  }

  void* raw(int device, std::size_t size) {
    void* data = Backend::raw_allocate(device, size);
    if (data != nullptr) block_sizes_[data] = size;
    return data;
  }

  void release_locked(int device) {
    if (cached_.empty()) return;
    Backend::before_release(device);
    for (const auto& [size, data] : cached_) {
      Backend::raw_free(device, data);
      block_sizes_.erase(data);
    }
    cached_.clear();
    stats_.bytes_cached = 0;
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;            // free blocks by size
  std::unordered_map<void*, std::size_t> live_;         // held blocks -> bytes requested (what stats count)
  std::unordered_map<void*, std::size_t> block_sizes_;  // every block we own -> its real size
  MemoryStats stats_;
};

}  // namespace ddl::detail
