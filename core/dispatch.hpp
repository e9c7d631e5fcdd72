// The one place that sends an op to the backend of its device. An op hands
// over both implementations:
//
//   backend::dispatch("conv2d", device,
//                     [&] { cpu_backend::conv2d_forward(g, x, w, b, y); },
//                     [&](auto stream) { cuda_backend::conv2d_forward(stream, g, x, w, b, y); });
//
// The CUDA callable is generic (`auto stream`, a cuda_backend::Stream): a
// build without CUDA never instantiates it, so the CUDA kernels it names need
// not exist there, and a CUDA tensor reaching such a build is one clear error.
// Each (op, device) a call site runs without an error is noted
// (entry_points.hpp).
// Empty tensors are the op's business, not dispatch's: what counts as empty,
// and what an empty input must still produce (zeros for the weight gradient
// of an empty batch), depends on the op.
#pragma once

#include <ddl/build_config.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/entry_points.hpp>

namespace ddl::backend {

// Throws: `op` got a tensor on `device`, a CUDA device, in a build of ddl
// without CUDA.
[[noreturn]] void fail_without_cuda(const char* op, const Device& device);

// Runs on_cpu() for a CPU device, or on_cuda(the device's stream) for a
// CUDA device; the stream is fetched here, once, and every launch the CUDA
// callable makes names it.
template <class OnCpu, class OnCuda>
void dispatch(const char* op, const Device& device, const OnCpu& on_cpu, const OnCuda& on_cuda) {
  if (device.is_cpu()) {
    on_cpu();
  } else if constexpr (build::kWithCuda) {
    on_cuda(cuda_backend::stream(device.index()));
  } else {
    fail_without_cuda(op, device);
  }
  static EntryPointSite site;  // one per call site: each has its own lambdas
  site.note(op, device);       // once it has run without an error
}

}  // namespace ddl::backend
