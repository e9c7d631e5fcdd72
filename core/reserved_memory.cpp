// ReservedMemory (reserved_memory.hpp): anonymous pages on the host, CUDA's
// virtual memory management on a GPU.
#include <ddl/core/reserved_memory.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <ddl/core/check.hpp>
#include <ddl/core/cuda/runtime.hpp>

namespace ddl {

std::shared_ptr<ReservedMemory> ReservedMemory::make(const Device& device, std::size_t bytes) {
  return std::shared_ptr<ReservedMemory>(new ReservedMemory(device, bytes));
}

ReservedMemory::ReservedMemory(const Device& device, std::size_t bytes) : device_(device), bytes_(bytes) {
  check_device_exists(device);
  if (device.is_cuda()) {
    data_ = cuda_backend::reserve_addresses(device.index(), bytes, &bytes_);
    try {
      commit();
    } catch (...) {  // no destructor runs for a constructor that throws
      cuda_backend::free_addresses(device.index(), data_, bytes_);
      throw;
    }
    return;
  }
  // At least one page, so that an empty bucket still has an address.
  bytes_ = std::max<std::size_t>(bytes, 1);
  data_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  DDL_CHECK(data_ != MAP_FAILED, "ReservedMemory: mmap of {} bytes on {} failed: {}", bytes_, device,
            std::strerror(errno));
  committed_ = true;
}

ReservedMemory::~ReservedMemory() {
  // Errors are ignored: a destructor must not throw, and the memory goes
  // back with the process at worst.
  if (device_.is_cpu()) {
    munmap(data_, bytes_);
    return;
  }
  try {
    release();
    cuda_backend::free_addresses(device_.index(), data_, bytes_);
  } catch (const std::exception&) {
  }
}

Tensor ReservedMemory::tensor(std::int64_t numel) {
  const std::size_t bytes = static_cast<std::size_t>(numel) * sizeof(float);
  DDL_CHECK(bytes <= bytes_, "ReservedMemory: a tensor of {} floats does not fit its {} bytes", numel, bytes_);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(device_, data_, bytes, shared_from_this());
  impl->shape = Shape{numel};
  impl->dtype = DType::Float32;
  return Tensor(std::move(impl));
}

void ReservedMemory::commit() {
  if (committed_) return;
  if (device_.is_cuda()) physical_ = cuda_backend::map_memory(device_.index(), data_, bytes_);
  committed_ = true;
}

void ReservedMemory::release() {
  if (!committed_) return;
  if (device_.is_cuda()) {
    cuda_backend::unmap_memory(device_.index(), data_, bytes_, physical_);
  } else {
    DDL_CHECK(madvise(data_, bytes_, MADV_DONTNEED) == 0, "ReservedMemory: madvise of {} bytes failed: {}", bytes_,
              std::strerror(errno));
  }
  committed_ = false;
}

}  // namespace ddl
