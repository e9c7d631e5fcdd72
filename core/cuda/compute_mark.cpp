// ComputeMark (compute_mark.hpp) on the CUDA runtime.
#include <ddl/core/cuda/compute_mark.hpp>

#include <cuda_runtime.h>

#include <ddl/core/check.hpp>
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>

namespace ddl::cuda_backend {

struct ComputeMark::State {
  int device = 0;
  cudaEvent_t event = nullptr;
  // record() was called since the last order_before(). Set and cleared on
  // the threads that record and wait, which the caller orders (a mutex).
  bool recorded = false;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  // A destructor must not throw: an error leaves the event to the process.
  ~State() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

ComputeMark::ComputeMark(int device) : state_(std::make_unique<State>()) {
  state_->device = device;
  const DeviceGuard guard(device);
  DDL_CUDA_CHECK(device, cudaEventCreateWithFlags(&state_->event, cudaEventDisableTiming));
}

ComputeMark::~ComputeMark() = default;
ComputeMark::ComputeMark(ComputeMark&&) noexcept = default;
ComputeMark& ComputeMark::operator=(ComputeMark&&) noexcept = default;

void ComputeMark::record() {
  State& s = *state_;
  const DeviceGuard guard(s.device);
  DDL_CUDA_CHECK(s.device, cudaEventRecord(s.event, stream(s.device).handle));
  s.recorded = true;
}

void ComputeMark::order_before(CUstream_st* waiter) {
  State& s = *state_;
  DDL_CHECK(s.recorded, "ComputeMark on cuda:{}: a stream was to wait for it without a record() since its last "
            "wait, so nothing says when the memory it guards is written", s.device);
  s.recorded = false;
  const DeviceGuard guard(s.device);
  DDL_CUDA_CHECK(s.device, cudaStreamWaitEvent(waiter, s.event, 0));
}

void ComputeMark::synchronize() const {
  const State& s = *state_;
  const DeviceGuard guard(s.device);
  DDL_CUDA_CHECK(s.device, cudaEventSynchronize(s.event));
}

}  // namespace ddl::cuda_backend
