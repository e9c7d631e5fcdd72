// Internal to the CUDA backend: a copy from ordinary (pageable) host memory
// to a GPU that the host does not wait for, the copy every batch, parameter
// and Tensor::to(cuda) takes.
//
// The bytes travel through a ring of page-locked chunks, one ring per
// device: the host copies the next piece of the source into the next chunk,
// queues that chunk's transfer on the device's compute stream and goes on;
// a chunk is written again only once its transfer is done (an event). So
//
//   the caller may free or change the source as soon as upload() returns;
//   kernels queued on the compute stream afterwards see the values;
//   the host waits only when every chunk still has a transfer the GPU has
//   not reached, not for the kernels queued before (a batch's copy no longer
//   waits for the previous step's update), and the GPU's copy engine reads
//   page-locked memory directly.
//
// This is what PyTorch's DataLoader(pin_memory=True) with
// .to(device, non_blocking=True) gives, made the default: the price is
// kUploadChunks x kUploadChunkBytes of page-locked memory per device used,
// taken at the first upload and kept for the life of the process.
#pragma once

#include <cstddef>

namespace ddl::cuda_backend {

inline constexpr std::size_t kUploadChunkBytes = std::size_t{4} << 20;
inline constexpr int kUploadChunks = 4;

// Queues the copy of `bytes` from host memory at `source` to `target` on
// `device`, ordered on that device's compute stream; returns once `source`
// has been read. Thread-safe (uploads to one device take turns).
void upload(int device, void* target, const void* source, std::size_t bytes);

}  // namespace ddl::cuda_backend
