// Internal: the block cache behind both allocators (CPU and CUDA). Freed
// blocks are kept per device in a size-ordered pool and handed out again, so
// steady-state training allocates nothing from the system: on the GPU that
// avoids cudaMalloc/cudaFree (which synchronise); on the CPU it avoids the
// page faults of freshly mapped memory, which for multi-MiB activations cost
// more than the ops that fill them.
//
// A cache that only grows would hold every size a program ever used: with
// shapes that change (images of many sizes, tiles, a fuzzer's inputs) it
// held 808 MiB of blocks for 1.4 MiB of live tensors after 600 growing
// convolutions (bench/shape_churn.cpp). So before taking new memory from
// the system, the pool gives back the blocks freed longest ago until what it
// caches is within the backend's limit for the most block bytes tensors have
// held at once (their high-water mark). Steady-state training reuses the
// same blocks step after step and stays within the CPU's limit of twice that
// mark plus 64 MiB (mnist_cnn and resnet_small cache about 1.6 times their
// peak); a phase with other shapes (evaluation at another batch size) can
// cost blocks of the next phase once, where the two together pass the limit.
//
// Backend provides: static void* raw_allocate(int device, std::size_t bytes)
// (nullptr when out of memory), static void raw_free(int device, void*),
// static void before_release(int device) (e.g. wait for queued GPU work),
// static void after_release(int device, std::size_t bytes) (e.g. hand the
// freed bytes back to the system) and static std::size_t
// cache_limit(std::size_t high_water) (the most bytes to keep cached once
// live blocks have held `high_water` bytes at once).
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
    live_blocks_ += block_sizes_.at(data);
    high_water_ = std::max(high_water_, live_blocks_);
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
    live_blocks_ -= block;
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

  void trim_locked(int device) { give_back_until(device, Backend::cache_limit(high_water_)); }
  void release_locked(int device) { give_back_until(device, 0); }

  // Frees the blocks cached longest ago until at most `limit` bytes stay
  // cached. Each block leaves the books before it is freed: if freeing
  // threw, the block would be lost, not handed out again.
  void give_back_until(int device, std::size_t limit) {
    if (stats_.bytes_cached <= limit) return;
    Backend::before_release(device);
    std::size_t released = 0;
    while (stats_.bytes_cached > limit) {
      const auto oldest = by_age_.begin()->second;
      void* data = oldest->second.data;
      released += oldest->first;
      forget(oldest);
      block_sizes_.erase(data);
      Backend::raw_free(device, data);
    }
    Backend::after_release(device, released);
  }

  void* raw(int device, std::size_t size) {
    void* data = Backend::raw_allocate(device, size);
    if (data != nullptr) block_sizes_[data] = size;
    return data;
  }

  std::mutex mutex_;
  CachedBlocks cached_;                                              // free blocks by size
  std::map<std::uint64_t, typename CachedBlocks::iterator> by_age_;  // the same, oldest first
  std::uint64_t next_age_ = 0;
  std::size_t live_blocks_ = 0;                         // the block bytes of live_
  std::size_t high_water_ = 0;                          // the most live_blocks_ ever held (reset_peak leaves it)
  std::unordered_map<void*, std::size_t> live_;         // held blocks -> bytes requested (what stats count)
  std::unordered_map<void*, std::size_t> block_sizes_;  // every block we own -> its real size
  MemoryStats stats_;
};

}  // namespace ddl::detail
