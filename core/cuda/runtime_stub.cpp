// The CUDA backend of a build without CUDA: no devices, and every call that
// would need one is an error (device checks stop ops long before these).
#include <ddl/core/check.hpp>
#include <ddl/core/cuda/compute_mark.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/cuda/staging.hpp>

namespace ddl::cuda_backend {
namespace {
[[noreturn]] void no_cuda(const char* call) { detail::fail("{}: this build of ddl has no CUDA support", call); }
}  // namespace

int device_count() { return 0; }
std::string unavailable_reason() { return "ddl was built with DDL_CUDA=OFF"; }
std::string device_uuid(int) { no_cuda("cuda_backend::device_uuid"); }
void* allocate(int, std::size_t) { no_cuda("cuda_backend::allocate"); }
void deallocate(int, void*) { no_cuda("cuda_backend::deallocate"); }
MemoryStats memory_stats(int) { no_cuda("cuda_backend::memory_stats"); }
void reset_peak_memory_stats(int) { no_cuda("cuda_backend::reset_peak_memory_stats"); }
void empty_cache(int) {}
void* reserve_addresses(int, std::size_t, std::size_t*) { no_cuda("cuda_backend::reserve_addresses"); }
void free_addresses(int, void*, std::size_t) { no_cuda("cuda_backend::free_addresses"); }
std::uint64_t map_memory(int, void*, std::size_t) { no_cuda("cuda_backend::map_memory"); }
void unmap_memory(int, void*, std::size_t, std::uint64_t) { no_cuda("cuda_backend::unmap_memory"); }
void copy(void*, int, const void*, int, std::size_t, CopyKind) { no_cuda("cuda_backend::copy"); }
void synchronize(int) { no_cuda("cuda_backend::synchronize"); }

struct ComputeMark::State {};
ComputeMark::ComputeMark(int) { no_cuda("cuda_backend::ComputeMark"); }
ComputeMark::~ComputeMark() = default;
ComputeMark::ComputeMark(ComputeMark&&) noexcept = default;
ComputeMark& ComputeMark::operator=(ComputeMark&&) noexcept = default;
void ComputeMark::record() { no_cuda("cuda_backend::ComputeMark::record"); }
void ComputeMark::order_before(CUstream_st*) { no_cuda("cuda_backend::ComputeMark::order_before"); }
void ComputeMark::synchronize() const { no_cuda("cuda_backend::ComputeMark::synchronize"); }

struct StagingBuffer::State {};
StagingBuffer::StagingBuffer(int, std::size_t) { no_cuda("cuda_backend::StagingBuffer"); }
StagingBuffer::~StagingBuffer() = default;
StagingBuffer::StagingBuffer(StagingBuffer&&) noexcept = default;
StagingBuffer& StagingBuffer::operator=(StagingBuffer&&) noexcept = default;
void* StagingBuffer::host() const { no_cuda("cuda_backend::StagingBuffer::host"); }
std::size_t StagingBuffer::bytes() const { no_cuda("cuda_backend::StagingBuffer::bytes"); }
void StagingBuffer::download(const void*, ComputeMark&) { no_cuda("cuda_backend::StagingBuffer::download"); }
void StagingBuffer::upload(void*) { no_cuda("cuda_backend::StagingBuffer::upload"); }

}  // namespace ddl::cuda_backend
