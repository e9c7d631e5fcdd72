// Device memory for the CUDA backend through the shared caching pool
// (core/caching_pool.hpp): cudaMalloc/cudaFree synchronise the device and
// cost microseconds to milliseconds each, so freed blocks are reused.
//
// Why reuse is safe: every op of a device is queued on that device's
// compute stream (cuda_backend::stream), so a block freed by the host after
// queuing its last use is only touched again by work queued later on the
// same stream. Two other streams touch tensor memory, and each synchronises
// before such a block can be freed: NCCL's (every NCCL call waits for its
// stream before it returns, or aborts and drains it; an asynchronous
// message's tensor must outlive its wait()) and the copy stream of
// StagingBuffer (core/cuda/staging.hpp), which copies only DataParallel's
// gradient buckets, tensors that live as long as the DataParallel, and
// whose uploads the compute stream waits for.
#include <ddl/core/caching_pool.hpp>
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/error.hpp>

#include <limits>
#include <string>
#include <vector>

namespace ddl::cuda_backend {
namespace {

struct CudaMemory {
  static void* raw_allocate(int device, std::size_t bytes) {
    const DeviceGuard guard(device);
    void* data = nullptr;
    if (cudaMalloc(&data, bytes) == cudaSuccess) return data;
    cudaGetLastError();  // out of memory is reported by the caller
    return nullptr;
  }
  static void raw_free(int device, void* data) { DDL_CUDA_CHECK(device, cudaFree(data)); }
  // Blocks in the cache may still be read by queued kernels.
  static void before_release(int device) {
    const DeviceGuard guard(device);
    DDL_CUDA_CHECK(device, cudaStreamSynchronize(stream(device).handle));
  }
  static void after_release(int, std::size_t) {}
  // Unbounded, as PyTorch's: giving blocks back synchronises the device, and
  // a GPU that runs out answers nullptr, on which the pool empties its cache
  // and tries again.
  static std::size_t cache_limit(std::size_t) { return std::numeric_limits<std::size_t>::max(); }
};

using CudaPool = detail::CachingPool<CudaMemory>;

// Never destroyed, as the CPU pools (core/allocator.cpp): a tensor held by
// a static may be freed after the pools' destruction would have run.
CudaPool& pool(int device) {
  static auto* const pools = new std::vector<CudaPool>(static_cast<std::size_t>(device_count()));
  return pools->at(static_cast<std::size_t>(device));
}

}  // namespace

void* allocate(int device, std::size_t bytes) {
  void* data = pool(device).allocate(device, bytes);
  if (data == nullptr) {
    throw Error("out of memory on cuda:" + std::to_string(device) + " allocating " + std::to_string(bytes) +
                " bytes (" + std::to_string(pool(device).stats().bytes_in_use) + " bytes in use)");
  }
  return data;
}

void deallocate(int device, void* data) { pool(device).deallocate(data); }
MemoryStats memory_stats(int device) { return pool(device).stats(); }
void reset_peak_memory_stats(int device) { pool(device).reset_peak(); }
void empty_cache(int device) { pool(device).release_cache(device); }

}  // namespace ddl::cuda_backend
