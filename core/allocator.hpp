// Raw memory for tensors, per device, with counters of bytes in use and the
// peak. Both backends allocate through a caching pool (caching_pool.hpp), so
// steady-state training neither calls cudaMalloc/cudaFree nor page-faults
// fresh CPU memory. CPU memory is 64-byte aligned (a cache line; AVX-512).
// A CPU cache holds at most about twice the most memory tensors ever held
// at once plus 64 MiB (sizes that keep changing would otherwise grow it
// without end); a GPU's is given back when the GPU runs out.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>

#include <ddl/core/device.hpp>
#include <ddl/core/memory_form.hpp>

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

  // The bytes in row-major order: a storage held in another form
  // (core/memory_form.hpp) is put in row-major order first, into a block
  // of its own that takes the old one's place.
  void* data() const {
    if (formed_.load(std::memory_order_acquire)) to_row_major();
    return data_;
  }
  std::size_t bytes() const { return bytes_; }
  const Device& device() const { return device_; }
  // Whether this storage allocated its memory itself (not a part of another
  // storage, not memory held elsewhere).
  bool owns_memory() const { return !base_ && !owner_; }

  // The bytes as they are and the form they are in (null: row-major), for
  // the ops that read any form. Not to be called while another thread may
  // read data(), which may move the bytes.
  void* stored_data() const { return data_; }
  std::shared_ptr<const MemoryForm> form() const;
  // Whether set_form may be called.
  bool can_take_form() const { return !device_.is_cuda() && owns_memory() && !parts_taken_; }
  // Says that the bytes, just written, are in `form`: a CPU storage that
  // owns its memory, and of which no part has been taken (a part's
  // storage points into the bytes, which data() would move).
  void set_form(std::shared_ptr<const MemoryForm> form);

 private:
  void to_row_major() const;

  Device device_;
  std::size_t bytes_;
  mutable void* data_ = nullptr;
  std::shared_ptr<Storage> base_;      // set for a part of another storage
  std::shared_ptr<const void> owner_;  // set for memory held elsewhere
  mutable std::shared_ptr<const MemoryForm> form_;
  mutable std::atomic<bool> formed_{false};  // form_ is set: read without the lock on every data()
  std::atomic<bool> parts_taken_{false};     // a storage shares part of this one's bytes
  mutable std::mutex form_mutex_;
};

}  // namespace ddl
