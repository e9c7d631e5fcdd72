// Internal to ddl: the host copy of a region of GPU memory that code working
// on host memory must see (a data-parallel gradient bucket reduced over MPI).
// Two things make such copies cheap:
//
//   the host side is page-locked (cudaHostAlloc), so the GPU's copy engine
//   reads and writes it directly, without the driver staging pageable
//   memory through a buffer of its own;
//   the copies run on a copy stream of the device, not its compute stream:
//   a download waits only for the work marked as writing the region (a
//   ComputeMark), not for every kernel queued since, so backward goes on
//   computing while a finished bucket travels; an upload makes the compute
//   stream wait for it on the GPU, and the host does not wait at all.
#pragma once

#include <cstddef>
#include <memory>

#include <ddl/core/cuda/compute_mark.hpp>

namespace ddl::cuda_backend {

class StagingBuffer {
 public:
  // `bytes` of page-locked host memory for a region of `device`'s memory.
  StagingBuffer(int device, std::size_t bytes);
  ~StagingBuffer();  // waits for its copies in flight
  StagingBuffer(StagingBuffer&&) noexcept;
  StagingBuffer& operator=(StagingBuffer&&) noexcept;

  void* host() const;
  std::size_t bytes() const;

  // Copies the region at `source` into host() once the work that `written`
  // marks is done; returns when host() holds it. Each download needs a
  // record() of `written` of its own (a ddl::Error otherwise).
  void download(const void* source, ComputeMark& written);
  // Copies host() into the region at `target`; kernels queued on the
  // compute stream after this call run after the copy. The copy does not
  // wait for kernels queued before: nothing may be using `target` then (a
  // bucket's users are done once its download has run). Returns at once;
  // the next download or the destructor waits for it.
  void upload(void* target);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ddl::cuda_backend
