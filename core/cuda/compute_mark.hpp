// Internal to ddl: a point in a device's compute stream (a CUDA event),
// marked by the thread that queued the kernels before it. Another stream
// that must read what those kernels wrote waits for this point alone, not
// for the compute queued since: a data-parallel gradient bucket starts
// travelling once its gradients are written, while backward goes on
// queuing the kernels of earlier layers.
#pragma once

#include <memory>

struct CUstream_st;  // the CUDA runtime's stream: cudaStream_t is CUstream_st*

namespace ddl::cuda_backend {

class ComputeMark {
 public:
  explicit ComputeMark(int device);
  ~ComputeMark();
  ComputeMark(ComputeMark&&) noexcept;
  ComputeMark& operator=(ComputeMark&&) noexcept;

  // Marks the work queued on the device's compute stream so far: call it on
  // the thread that queued the writers, once they are all queued.
  void record();
  // Makes `stream`, of the same device, wait for the marked work. Each wait
  // needs a record() since the last one (a ddl::Error otherwise): an old
  // mark would let the waiter read half-written memory.
  void order_before(CUstream_st* stream);
  // Returns once the marked work is done.
  void synchronize() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ddl::cuda_backend
