// Internal: the block cache behind both allocators (CPU and CUDA). Freed
// blocks are kept per device in a size-ordered pool and handed out again, so
// steady-state training allocates nothing from the system: on the GPU that
// avoids cudaMalloc/cudaFree (which synchronise); on the CPU it avoids the
// page faults of freshly mapped memory, which for multi-MiB activations cost
// more than the ops that fill them.
//
// A cache that only grows would hold every size a program ever used: with
// shapes that change (images of many sizes, tiles, a fuzzer's inputs) it
// held 800 MB of blocks for 2 MB of live tensors after 600 convolutions.
// So before taking new memory from the system, the pool gives back the
// blocks cached longest ago until what it caches is within the backend's
// limit for the most bytes tensors have held at once. Steady-state training
// reuses the same blocks step after step, and caches about 1.6 times that
// peak (mnist_cnn, resnet_small), within the CPU's limit of twice the peak
// plus 64 MiB.
//
// Backend provides: static void* raw_allocate(int device, std::size_t bytes)
// (nullptr when out of memory), static void raw_free(int device, void*),
// static void before_release(int device) (e.g. wait for queued GPU work),
// static void after_release(int device) (e.g. hand freed memory back to the
// system) and static std::size_t cache_limit(std::size_t peak_bytes) (the
// most bytes to keep cached once tensors have held `peak_bytes` at once).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
    if (data == nullptr) {
      trim_locked(device);
      data = raw(device, size);
    }
    if (data == nullptr) {
      release_locked(device);
      data = raw(device, size);
    }
    if (data == nullptr) return nullptr;
    live_[data] = bytes;
    stats_.bytes_in_use += bytes;
    stats_.allocations += 1;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
    high_water_ = std::max(high_water_, stats_.bytes_in_use);
    return data;
  }

  void deallocate(void* data) {
    const std::lock_guard lock(mutex_);
    const auto it = live_.find(data);
    if (it == live_.end()) return;  // not ours: never happens through Storage
    const std::size_t block = block_sizes_.at(data);
    const auto cached = cached_.emplace(block, Cached{data, next_age_});
    by_age_.emplace(next_age_++, cached);
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
  // A cached block, and when it was freed (a count of frees).
  struct Cached {
    void* data;
    std::uint64_t age;
  };
  using CachedBlocks = std::multimap<std::size_t, Cached>;

  void* take_cached(std::size_t size) {
    const auto it = cached_.lower_bound(size);
    if (it == cached_.end() || it->first > 2 * size) return nullptr;
    void* data = it->second.data;
    forget(it);
    return data;
  }

  void forget(typename CachedBlocks::iterator it) {
    stats_.bytes_cached -= it->first;
    by_age_.erase(it->second.age);
    cached_.erase(it);
  }

  // Frees the blocks cached longest ago until the cache is within its limit.
  void trim_locked(int device) {
    const std::size_t limit = Backend::cache_limit(high_water_);
    if (stats_.bytes_cached <= limit) return;
    Backend::before_release(device);
    while (stats_.bytes_cached > limit) {
      const auto oldest = by_age_.begin()->second;
      Backend::raw_free(device, oldest->second.data);
      block_sizes_.erase(oldest->second.data);
      forget(oldest);
    }
    Backend::after_release(device);
  }

  void* raw(int device, std::size_t size) {
    void* data = Backend::raw_allocate(device, size);
    if (data != nullptr) block_sizes_[data] = size;
    return data;
  }

  void release_locked(int device) {
    if (cached_.empty()) return;
    Backend::before_release(device);
    for (const auto& [size, block] : cached_) {
      Backend::raw_free(device, block.data);
      block_sizes_.erase(block.data);
    }
    cached_.clear();
    by_age_.clear();
    stats_.bytes_cached = 0;
    Backend::after_release(device);
  }

  std::mutex mutex_;
  CachedBlocks cached_;                                              // free blocks by size
  std::map<std::uint64_t, typename CachedBlocks::iterator> by_age_;  // the same, oldest first
  std::uint64_t next_age_ = 0;
  std::size_t high_water_ = 0;                          // the most bytes in use at once, ever (reset_peak leaves it)
  std::unordered_map<void*, std::size_t> live_;         // held blocks -> bytes requested (what stats count)
  std::unordered_map<void*, std::size_t> block_sizes_;  // every block we own -> its real size
  MemoryStats stats_;
};

}  // namespace ddl::detail
