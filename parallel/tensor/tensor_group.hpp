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
#pragma once

#include <cstdint>

#include <ddl/core/tensor.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/communicator.hpp>

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

 private:
  Communicator comm_;
  AllreduceAlgorithm algorithm_;
  int rank_, size_;
};

}  // namespace ddl::parallel
