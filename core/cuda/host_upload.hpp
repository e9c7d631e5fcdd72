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
//   the GPU's copy engine reads page-locked memory directly;
//   the host waits for the GPU only when the chunk it needs next still has
//   a transfer the GPU has not reached. Each copy takes whole chunks, so
//   copies that add up to kUploadChunks chunks return at once, whatever is
//   queued before them (a batch's inputs and targets, two chunks, while the
//   previous step's update runs); a larger one, or the next ones after it,
//   waits for the compute queued before its oldest chunk's transfer.
//
// This is what PyTorch's DataLoader(pin_memory=True) with
// .to(device, non_blocking=True) gives, made the default, within a bounded
// amount of page-locked memory: kUploadChunks x kUploadChunkBytes per
// device used, taken at the first upload and kept for the life of the
// process. Before, each copy waited for the whole compute stream.
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
