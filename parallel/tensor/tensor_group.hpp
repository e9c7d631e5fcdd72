// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): the ranks of a
// tensor group hold the slices of one model replica's split layers and
// compute each split layer's output together, every layer. A TensorGroup
// is those ranks and how they sum: every split layer's allreduce runs on
// it, so every rank of the group must get the same bits back (the
// activations after it are replicated, and the layers after them must
// compute alike on every rank). Our ring, rhd, tree and naive sum each
// element on one rank and copy that sum to the others, so they do; MPI's
// builtin is asked the same and MPICH does, but MPI does not promise it.
//
// Features are split as sharding splits buckets (chunk_range): rank t of T
// holds features [begin, end) of part(n), the first n mod T ranks one more.
//
// On GPUs the first allreduce of a CUDA tensor decides, collectively over
// the group, where the group sums: over NCCL on the GPU (NCCL's own
// allreduce for builtin, our algorithm over its point-to-point messages
// otherwise) when every rank of the group drives a GPU of its own and ddl
// has NCCL; else through host memory over MPI, as on the CPU.
#pragma once

#include <cstdint>
#include <memory>

#include <ddl/core/tensor.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>

namespace ddl::parallel {

class TensorGroup {
 public:
  TensorGroup(Communicator comm, AllreduceAlgorithm algorithm);

  int rank() const { return rank_; }
  int size() const { return size_; }
  AllreduceAlgorithm algorithm() const { return algorithm_; }
  const Communicator& communicator() const { return comm_; }
  // This rank's features of n: [begin, end).
  ChunkRange part(std::int64_t n) const { return chunk_range(n, size_, rank_); }
  // Sums `tensor` over the group in place (a collective).
  void allreduce(const Tensor& tensor) const;
  // Whether the allreduces of CUDA tensors run over NCCL (false before the
  // first one).
  bool over_nccl() const { return nccl_ != nullptr; }
  // Whether communicator().bytes_sent() counts the allreduces: our
  // algorithms over MPI do, MPI's builtin and NCCL do not.
  bool counted() const { return algorithm_ != AllreduceAlgorithm::builtin && !over_nccl(); }

 private:
  Communicator comm_;
  AllreduceAlgorithm algorithm_;
  int rank_, size_;
  // Decided at the first CUDA tensor (the layers hold the group as const).
  mutable bool gpu_decided_ = false;
  mutable std::shared_ptr<NcclCommunicator> nccl_;
};

}  // namespace ddl::parallel
