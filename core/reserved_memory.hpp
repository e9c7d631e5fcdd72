// ReservedMemory: addresses that outlive their contents. The memory is
// reserved once and its backing given back between uses, then taken again
// before the next: sharding stage 3's gathered parameters, which tensors
// that forward saved for backward keep pointing at while the parameters
// are released in between (PyTorch FSDP frees a storage's memory rather
// than the storage, for the same reason).
//
//   host   the pages are mapped anonymously; release() gives them back
//          with madvise(MADV_DONTNEED), and the next touch maps zeroed
//          pages again, so commit() has nothing to do.
//   GPU    CUDA's virtual memory management (cuda/runtime.hpp): a range
//          of device addresses reserved once (cuMemAddressReserve);
//          commit() creates physical memory and maps it there (cuMemCreate,
//          cuMemMap, cuMemSetAccess), release() unmaps and frees it, after
//          the compute stream has finished the work that may read it.
//
// Between release() and commit() nothing may touch the memory: a GPU
// faults, and the host reads zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <ddl/core/tensor.hpp>

namespace ddl {

class ReservedMemory : public std::enable_shared_from_this<ReservedMemory> {
 public:
  // At least `bytes` on `device` (a GPU rounds up to its mapping
  // granularity, 2 MiB on current ones), committed.
  static std::shared_ptr<ReservedMemory> make(const Device& device, std::size_t bytes);
  ~ReservedMemory();
  ReservedMemory(const ReservedMemory&) = delete;
  ReservedMemory& operator=(const ReservedMemory&) = delete;

  // A float32 tensor of `numel` elements from the start of the memory,
  // which it keeps alive.
  Tensor tensor(std::int64_t numel);
  void commit();   // backed again (contents undefined) unless it is
  void release();  // the backing given back unless it was
  bool committed() const { return committed_; }

 private:
  ReservedMemory(const Device& device, std::size_t bytes);

  Device device_;
  std::size_t bytes_ = 0;  // as reserved
  void* data_ = nullptr;
  std::uint64_t physical_ = 0;  // a GPU's mapped memory, while committed
  bool committed_ = false;
};

}  // namespace ddl
