// The CUDA backend as seen from host code compiled without nvcc: device
// discovery, the caching allocator, copies and kernel launch. Defined in the
// .cu files of this folder when DDL_CUDA is on, and by runtime_stub.cpp (no
// devices, every call an error) when it is off.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <ddl/core/allocator.hpp>
#include <ddl/core/gemm_args.hpp>

namespace ddl::cuda_backend {

// Number of usable GPUs; 0 without a driver or device (never an error).
int device_count();
// Why device_count() is 0 ("built without CUDA", the driver's error, ...).
std::string unavailable_reason();

void* allocate(int device, std::size_t bytes);
void deallocate(int device, void* data);
MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
void empty_cache(int device);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// Copies on the destination's (or for DeviceToHost the source's) stream and
// waits for it, so host memory is safe to use on return.
void copy(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, CopyKind kind);
void fill_zero(int device, void* data, std::size_t bytes);
void synchronize(int device);

void gemm(int device, const backend::GemmArgs& args);         // cuBLAS
void sum_all(int device, const float* x, std::int64_t n, float* out);  // CUB

// Runs kernel(i) for i in [0, n) in a grid-stride kernel on the device's
// stream. Instantiated for every entry of DDL_CORE_KERNELS.
template <class Kernel>
void launch(int device, std::int64_t n, const Kernel& kernel);

}  // namespace ddl::cuda_backend
