#include <ddl/core/backend.hpp>

#include <cstring>

namespace ddl::backend {

void gemm(const Device& device, const GemmArgs& args) {
  if (args.batch == 0 || args.m == 0 || args.n == 0) return;
  if (device.is_cpu()) {
    cpu_backend::gemm(args);
  } else {
    cuda_backend::gemm(device.index(), args);
  }
}

void sum_all(const Device& device, const float* x, std::int64_t n, float* out) {
  if (device.is_cpu()) {
    cpu_backend::sum_all(x, n, out);
  } else {
    cuda_backend::sum_all(device.index(), x, n, out);
  }
}

void copy_bytes(const Device& dst_device, void* dst, const Device& src_device, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
  } else if (src_device.is_cpu()) {
    cuda_backend::copy(dst, dst_device.index(), src, -1, bytes, cuda_backend::CopyKind::HostToDevice);
  } else if (dst_device.is_cpu()) {
    cuda_backend::copy(dst, -1, src, src_device.index(), bytes, cuda_backend::CopyKind::DeviceToHost);
  } else {
    cuda_backend::copy(dst, dst_device.index(), src, src_device.index(), bytes, cuda_backend::CopyKind::DeviceToDevice);
  }
}

void fill_zero(const Device& device, void* data, std::size_t bytes) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memset(data, 0, bytes);
  } else {
    cuda_backend::fill_zero(device.index(), data, bytes);
  }
}

}  // namespace ddl::backend
