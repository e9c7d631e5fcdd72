// StagingBuffer (staging.hpp) on the CUDA runtime.
#include <ddl/core/cuda/staging.hpp>

#include <cuda_runtime.h>

#include <exception>
#include <optional>

#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/per_device.hpp>
#include <ddl/core/cuda/runtime.hpp>

namespace ddl::cuda_backend {
namespace {

// Each device's copy stream, shared by its staging buffers: their copies
// run in the order they are asked for, beside the compute stream.
cudaStream_t copy_stream(int device) {
  static PerDevice<cudaStream_t> streams([](int d) {
    cudaStream_t created = nullptr;
    DDL_CUDA_CHECK(d, cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  });
  return streams.get(device);
}

}  // namespace

struct StagingBuffer::State {
  int device = 0;
  std::size_t bytes = 0;
  void* host = nullptr;
  cudaEvent_t copied = nullptr;  // on the copy stream: the last copy is done

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  // Errors are ignored: a destructor must not throw, and the memory goes
  // back with the process at worst.
  ~State() {
    std::optional<DeviceGuard> guard;
    try {
      guard.emplace(device);
    } catch (const std::exception&) {  // release what can be on the current device
    }
    if (copied != nullptr) {
      cudaEventSynchronize(copied);
      cudaEventDestroy(copied);
    }
    if (host != nullptr) cudaFreeHost(host);
  }
};

StagingBuffer::StagingBuffer(int device, std::size_t bytes) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.device = device;
  s.bytes = bytes;
  const DeviceGuard guard(device);
  DDL_CUDA_CHECK(device, cudaHostAlloc(&s.host, bytes > 0 ? bytes : 1, cudaHostAllocDefault));
  DDL_CUDA_CHECK(device, cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
}

StagingBuffer::~StagingBuffer() = default;
StagingBuffer::StagingBuffer(StagingBuffer&&) noexcept = default;
StagingBuffer& StagingBuffer::operator=(StagingBuffer&&) noexcept = default;

void* StagingBuffer::host() const { return state_->host; }
std::size_t StagingBuffer::bytes() const { return state_->bytes; }

void StagingBuffer::download(const void* source, ComputeMark& written) {
  State& s = *state_;
  const DeviceGuard guard(s.device);
  const cudaStream_t copies = copy_stream(s.device);
  written.order_before(copies);
  DDL_CUDA_CHECK(s.device, cudaMemcpyAsync(s.host, source, s.bytes, cudaMemcpyDeviceToHost, copies));
  DDL_CUDA_CHECK(s.device, cudaEventRecord(s.copied, copies));
  DDL_CUDA_CHECK(s.device, cudaEventSynchronize(s.copied));
}

void StagingBuffer::upload(void* target) {
  const State& s = *state_;
  const DeviceGuard guard(s.device);
  const cudaStream_t copies = copy_stream(s.device);
  DDL_CUDA_CHECK(s.device, cudaMemcpyAsync(target, s.host, s.bytes, cudaMemcpyHostToDevice, copies));
  DDL_CUDA_CHECK(s.device, cudaEventRecord(s.copied, copies));
  DDL_CUDA_CHECK(s.device, cudaStreamWaitEvent(stream(s.device).handle, s.copied, 0));
}

}  // namespace ddl::cuda_backend
