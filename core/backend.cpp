#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>

#include <cstdint>
#include <cstring>

namespace ddl::backend {

void fail_without_cuda(const char* op, const Device& device) {
  detail::fail("{}: a tensor is on {}, but this build of ddl has no CUDA support", op, device);
}

void gemm(const Device& device, const GemmArgs& args) {
  if (args.batch == 0 || args.m == 0 || args.n == 0) return;
  dispatch(
      "gemm", device, [&] { cpu_backend::gemm(args); }, [&](auto stream) { cuda_backend::gemm(stream, args); });
}

void sum_all(const Device& device, const float* x, std::int64_t n, float* out) {
  dispatch(
      "sum_all", device, [&] { cpu_backend::sum_all(x, n, out); },
      [&](auto stream) { cuda_backend::sum_all(stream, x, n, out); });
}

// Copies are noted (entry_points.hpp) on the GPU that does them, host
// copies on the destination, once done (a copy from the host: queued)
// without an error.
void copy_bytes(const Device& dst_device, void* dst, const Device& src_device, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  static EntryPointSite host_site, cuda_site, between_site;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    host_site.note("copy between host buffers", dst_device);
  } else if (src_device.is_cpu()) {
    cuda_backend::copy(dst, dst_device.index(), src, -1, bytes, cuda_backend::CopyKind::HostToDevice);
    cuda_site.note("copy host to device", dst_device);
  } else if (dst_device.is_cpu()) {
    cuda_backend::copy(dst, -1, src, src_device.index(), bytes, cuda_backend::CopyKind::DeviceToHost);
    cuda_site.note("copy device to host", src_device);
  } else {
    cuda_backend::copy(dst, dst_device.index(), src, src_device.index(), bytes, cuda_backend::CopyKind::DeviceToDevice);
    between_site.note(src_device == dst_device ? "copy within a device" : "copy between devices", dst_device);
  }
}

void fill_zero(const Device& device, void* data, std::size_t bytes) {
  if (bytes == 0) return;
  dispatch(
      "fill_zero", device, [&] { std::memset(data, 0, bytes); },
      [&](auto stream) { cuda_backend::fill_zero(stream, data, bytes); });
}

}  // namespace ddl::backend
