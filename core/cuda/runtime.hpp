// The CUDA backend as seen from host code compiled without nvcc: device
// discovery, the caching allocator, copies and kernel launch. Defined in the
// .cu files of this folder when DDL_CUDA is on. When it is off,
// runtime_stub.cpp defines the functions that take a device index (no
// devices, every call an error); those that take a Stream are reached only
// through backend::dispatch's CUDA branch, which such a build discards, so
// they are declared and never defined.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <ddl/core/allocator.hpp>
#include <ddl/core/gemm_args.hpp>

struct CUstream_st;  // the CUDA runtime's stream: cudaStream_t is CUstream_st*

namespace ddl::cuda_backend {

// Number of usable GPUs; 0 without a driver or device (never an error).
int device_count();
// Why device_count() is 0 ("built without CUDA", the driver's error, ...).
std::string unavailable_reason();
// The GPU's UUID as nvidia-smi prints it ("GPU-1a2b3c4d-..."): the same
// physical GPU whatever index CUDA_VISIBLE_DEVICES gives it in a process.
std::string device_uuid(int device);

void* allocate(int device, std::size_t bytes);
void deallocate(int device, void* data);
MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
void empty_cache(int device);

// CUDA's virtual memory management, for ReservedMemory (core/reserved_memory.hpp):
// a range of `bytes` of addresses on `device` (rounded up to the mapping
// granularity: *reserved), physical memory mapped there and readable and
// writable by the device (its handle returned), and the reverse. Unmapping
// first waits for the device's compute stream, whose queued work may
// still read the memory.
void* reserve_addresses(int device, std::size_t bytes, std::size_t* reserved);
void free_addresses(int device, void* data, std::size_t reserved);
std::uint64_t map_memory(int device, void* data, std::size_t reserved);
void unmap_memory(int device, void* data, std::size_t reserved, std::uint64_t physical);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// Copies on the destination's (or for DeviceToHost the source's) compute
// stream; host memory is safe to use on return. A copy to the host waits for
// the stream; one from the host returns once the source is read, before the
// GPU has the values (host_upload.hpp), which later work on the stream sees.
void copy(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes, CopyKind kind);
void synchronize(int device);

// The stream a device queues all its work on (created on first use), named
// by every kernel launch and library call of that device's ops.
struct Stream {
  int device;
  CUstream_st* handle;
};
Stream stream(int device);

void fill_zero(Stream stream, void* data, std::size_t bytes);
void gemm(Stream stream, const backend::GemmArgs& args);                  // cuBLAS
void sum_all(Stream stream, const float* x, std::int64_t n, float* out);  // CUB

// Runs kernel(i) for i in [0, n) in a grid-stride kernel on `stream`.
// Instantiated for every kernel of the modules' lists (kernel_list.hpp).
template <class Kernel>
void launch(Stream stream, std::int64_t n, const Kernel& kernel);

}  // namespace ddl::cuda_backend
