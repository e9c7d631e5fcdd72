// Internal to ddl: the host copy of a region of GPU memory that code working
// on host memory must see (a data-parallel gradient bucket reduced over MPI).
// Two things make such copies cheap:
//
//   the host side is page-locked (cudaHostAlloc), so the GPU's copy engine
//   reads and writes it directly, without the driver staging pageable
//   memory through a buffer of its own;
//   the copies run on a copy stream of the device, not its compute stream:
//   a download waits only for the work marked as writing the region
//   (mark_ready, an event on the compute stream), not for every kernel
//   queued since, so backward goes on computing while a finished bucket
//   travels; an upload makes the compute stream wait for it on the GPU, and
//   the host does not wait at all.
#pragma once

#include <cstddef>
#include <memory>

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

  // Marks the work queued on the device's compute stream so far as what the
  // next download must wait for: call it on the thread that queued the
  // kernels writing the region, once they are all queued.
  void mark_ready();
  // Copies the region at `source` into host() once the marked work is done;
  // returns when host() holds it. Each download needs a mark_ready of its
  // own (a ddl::Error otherwise).
  void download(const void* source);
  // Copies host() into the region at `target`; kernels queued on the
  // compute stream after this call run after the copy. Returns at once; the
  // next download or the destructor waits for it.
  void upload(void* target);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ddl::cuda_backend
