#include <ddl/core/allocator.hpp>
#include <ddl/core/caching_pool.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <vector>

namespace ddl {
namespace {

constexpr std::size_t kCpuAlignment = 64;

struct CpuMemory {
  static void* raw_allocate(int, std::size_t bytes) { return std::aligned_alloc(kCpuAlignment, bytes); }
  static void raw_free(int, void* data) { std::free(data); }
  static void before_release(int) {}
  // glibc keeps freed memory in its heap for its own reuse, where the pool
  // already is the cache: blocks the pool gives back would stay resident.
  // malloc_trim walks the whole heap, so it runs once 64 MiB have been
  // given back (any device), not for every block a churning cache drops.
  static void after_release(int, std::size_t bytes) {
    static std::atomic<std::size_t> untrimmed{0};
    constexpr std::size_t kTrimEvery = std::size_t{64} << 20;
    if (untrimmed.fetch_add(bytes) + bytes < kTrimEvery) return;
    untrimmed = 0;
    malloc_trim(0);
  }
  // The system overcommits: running out of memory is the OOM killer, not a
  // failed allocation the pool could answer by emptying its cache, so the
  // cache is bounded instead (caching_pool.hpp).
  static std::size_t cache_limit(std::size_t high_water) { return 2 * high_water + (std::size_t{64} << 20); }
};

using CpuPool = detail::CachingPool<CpuMemory>;

// Never destroyed: a tensor held by a static destroyed after the pools
// would return its block to a destroyed pool, and at exit LeakSanitizer
// would count every block a destroyed pool had cached as leaked.
CpuPool& cpu_pool(int index) {
  static auto* const pools = new std::vector<CpuPool>(static_cast<std::size_t>(config::cpu_device_count()));
  return (*pools)[static_cast<std::size_t>(index)];
}

void* cpu_allocate(int index, std::size_t bytes) {
  void* data = cpu_pool(index).allocate(index, bytes);
  DDL_CHECK(data != nullptr, "out of memory on cpu:{} allocating {} bytes ({} bytes in use)", index, bytes,
            cpu_pool(index).stats().bytes_in_use);
  return data;
}

}  // namespace

MemoryStats memory_stats(const Device& device) {
  check_device_exists(device);
  if (device.is_cuda()) return cuda_backend::memory_stats(device.index());
  return cpu_pool(device.index()).stats();
}

void reset_peak_memory_stats(const Device& device) {
  check_device_exists(device);
  if (device.is_cuda()) {
    cuda_backend::reset_peak_memory_stats(device.index());
    return;
  }
  cpu_pool(device.index()).reset_peak();
}

void empty_cache() {
  for (int i = 0; i < config::cpu_device_count(); ++i) cpu_pool(i).release_cache(i);
  for (int i = 0; i < cuda_backend::device_count(); ++i) cuda_backend::empty_cache(i);
}

Storage::Storage(const Device& device, std::size_t bytes) : device_(device), bytes_(bytes) {
  check_device_exists(device);
  data_ = device.is_cuda() ? cuda_backend::allocate(device.index(), bytes) : cpu_allocate(device.index(), bytes);
}

Storage::Storage(std::shared_ptr<Storage> base, std::size_t offset, std::size_t bytes)
    : device_(base->device()), bytes_(bytes), base_(std::move(base)) {
  DDL_CHECK(offset + bytes <= base_->bytes(), "Storage: bytes [{}, {}) lie outside a storage of {} bytes", offset,
            offset + bytes, base_->bytes());
  data_ = static_cast<std::byte*>(base_->data()) + offset;
  base_->parts_taken_ = true;
}

Storage::Storage(const Device& device, void* data, std::size_t bytes, std::shared_ptr<const void> owner)
    : device_(device), bytes_(bytes), data_(data), owner_(std::move(owner)) {}

std::shared_ptr<const MemoryForm> Storage::form() const {
  const std::lock_guard lock(form_mutex_);
  return form_;
}

void Storage::set_form(std::shared_ptr<const MemoryForm> form) {
  DDL_CHECK(can_take_form(), "Storage: only a CPU storage that owns all of its memory takes a form");
  DDL_CHECK(form == nullptr || form->bytes() == bytes_, "Storage: a form of {} bytes for a storage of {}",
            form == nullptr ? 0 : form->bytes(), bytes_);
  const std::lock_guard lock(form_mutex_);
  form_ = std::move(form);
  formed_.store(form_ != nullptr, std::memory_order_release);
}

void Storage::to_row_major() const {
  const std::lock_guard lock(form_mutex_);
  if (!form_) return;  // another thread was first
  struct Block {
    int device;
    void* data;
    ~Block() {
      if (data != nullptr) cpu_pool(device).deallocate(data);
    }
  };
  Block row_major{device_.index(), cpu_allocate(device_.index(), bytes_)};
  form_->to_row_major(data_, row_major.data);
  std::swap(data_, row_major.data);  // the old block is freed on the way out
  form_.reset();
  formed_.store(false, std::memory_order_release);
}

Storage::~Storage() {
  if (base_ || owner_) return;
  if (device_.is_cuda()) {
    cuda_backend::deallocate(device_.index(), data_);
  } else {
    cpu_pool(device_.index()).deallocate(data_);
  }
}

}  // namespace ddl
