// Raw memory for tensors, per device, with counters of bytes in use and the
// peak. Both backends allocate through a caching pool (caching_pool.hpp), so
// steady-state training neither calls cudaMalloc/cudaFree nor page-faults
// fresh CPU memory. CPU memory is 64-byte aligned (a cache line; AVX-512).
// A CPU cache holds at most about twice the most memory tensors ever held
// at once plus 64 MiB (sizes that keep changing would otherwise grow it
// without end); a GPU's is given back when the GPU runs out.
#pragma once

#include <cstddef>
#include <memory>

#include <ddl/core/device.hpp>

namespace ddl {

struct MemoryStats {
  std::size_t bytes_in_use = 0;  // held by live tensors
  std::size_t peak_bytes = 0;    // highest bytes_in_use since the last reset
  std::size_t allocations = 0;   // number of live allocations
  std::size_t bytes_cached = 0;  // freed blocks kept for reuse (empty_cache() returns them)
};

MemoryStats memory_stats(const Device& device);
void reset_peak_memory_stats(const Device& device);
// Returns every device's cached blocks to the system / driver.
void empty_cache();

// A block of device memory owned by one or more tensors (views share it).
class Storage {
 public:
  Storage(const Device& device, std::size_t bytes);
  // `bytes` of `base` from byte `offset` on: shares its memory, keeps it
  // alive and frees nothing itself.
  Storage(std::shared_ptr<Storage> base, std::size_t offset, std::size_t bytes);
  // `bytes` at `data` on `device`, memory that `owner` holds (a
  // ReservedMemory): kept alive, freed by nobody here.
  Storage(const Device& device, void* data, std::size_t bytes, std::shared_ptr<const void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }
  // Whether this storage allocated its memory itself (not a part of another
  // storage, not memory held elsewhere).
  bool owns_memory() const { return !base_ && !owner_; }

 private:
  Device device_;
  std::size_t bytes_;
  void* data_ = nullptr;
  std::shared_ptr<Storage> base_;      // set for a part of another storage
  std::shared_ptr<const void> owner_;  // set for memory held elsewhere
};

}  // namespace ddl
