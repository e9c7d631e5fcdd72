#include <ddl/core/allocator.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace ddl {
namespace {

constexpr std::size_t kCpuAlignment = 64;

// Counters of one logical CPU device.
struct CpuCounters {
  std::mutex mutex;
  MemoryStats stats;
};

CpuCounters& cpu_counters(int index) {
  static std::vector<CpuCounters> counters(static_cast<std::size_t>(config::cpu_device_count()));
  return counters[static_cast<std::size_t>(index)];
}

void* cpu_allocate(int index, std::size_t bytes) {
  const std::size_t rounded = std::max(kCpuAlignment, (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment);
  void* data = std::aligned_alloc(kCpuAlignment, rounded);
  DDL_CHECK(data != nullptr, "out of memory on cpu:{} allocating {} bytes", index, bytes);
  CpuCounters& counters = cpu_counters(index);
  const std::lock_guard lock(counters.mutex);
  counters.stats.bytes_in_use += bytes;
  counters.stats.allocations += 1;
  counters.stats.peak_bytes = std::max(counters.stats.peak_bytes, counters.stats.bytes_in_use);
  return data;
}

void cpu_deallocate(int index, void* data, std::size_t bytes) {
  std::free(data);
  CpuCounters& counters = cpu_counters(index);
  const std::lock_guard lock(counters.mutex);
  counters.stats.bytes_in_use -= bytes;
  counters.stats.allocations -= 1;
}

}  // namespace

MemoryStats memory_stats(const Device& device) {
  check_device_exists(device);
  if (device.is_cuda()) return cuda_backend::memory_stats(device.index());
  CpuCounters& counters = cpu_counters(device.index());
  const std::lock_guard lock(counters.mutex);
  return counters.stats;
}

void reset_peak_memory_stats(const Device& device) {
  check_device_exists(device);
  if (device.is_cuda()) {
    cuda_backend::reset_peak_memory_stats(device.index());
    return;
  }
  CpuCounters& counters = cpu_counters(device.index());
  const std::lock_guard lock(counters.mutex);
  counters.stats.peak_bytes = counters.stats.bytes_in_use;
}

void empty_cache() {
  for (int i = 0; i < cuda_backend::device_count(); ++i) cuda_backend::empty_cache(i);
}

Storage::Storage(const Device& device, std::size_t bytes) : device_(device), bytes_(bytes) {
  check_device_exists(device);
  data_ = device.is_cuda() ? cuda_backend::allocate(device.index(), bytes) : cpu_allocate(device.index(), bytes);
}

Storage::~Storage() {
  if (device_.is_cuda()) {
    cuda_backend::deallocate(device_.index(), data_);
  } else {
    cpu_deallocate(device_.index(), data_, bytes_);
  }
}

}  // namespace ddl
