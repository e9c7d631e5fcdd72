// Collectives written on point-to-point messages, one readable file per
// algorithm, beside MPI's and NCCL's own. Every rank calls the same
// collective with the same element count. Each algorithm is written once,
// over a transport (transport.hpp), and runs on two:
//
//   host memory    MPI messages (Communicator), sums by a loop on the
//                  calling thread;
//   GPU memory     NCCL point-to-point messages (NcclCommunicator), sums by
//                  a CUDA kernel queued on NCCL's stream between them:
//                  nothing passes through host memory.
//
// Both add with the elementwise Add functor every backend shares, in the
// same order, so the two give the same bits.
//
//   algorithm  file                 messages per rank   bytes sent per rank
//   ring       ring.cpp             2(p-1)              2 n (p-1)/p
//   rhd        halving_doubling.cpp 2 log2 p            2 n (p-1)/p (+n if p is not a power of two)
//   tree       tree.cpp             2 log2 p            up to 2 n log2 p
//   naive      naive.cpp            2 (root: 2(p-1))    n (root: 2 n (p-1))
//   shm        shared_memory.cpp    none: 2 barriers    none (one node only; ~2n copied in and out)
//   hierarchical hierarchical.cpp   in node: 2 log2 L;  in node: up to 2 n log2 L; across: leaders only,
//                                   leaders 2(N-1) more 2 n (N-1)/N (L ranks on a node, N nodes)
//   builtin    MPI_Allreduce        (MPICH's choice)
//
// An allreduce is a reduce-scatter followed by an allgather, and the two
// halves stand alone too (what sharded data parallelism is made of): each
// costs half the allreduce's bytes, n (p-1)/p per rank.
//
//   algorithm  reduce-scatter, allgather (each)
//   ring       ring.cpp: p-1 messages
//   rhd        halving_doubling.cpp: log2 p messages; where p is not a power of two
//              2 more, the folded pairs move n more bytes, and the halves at chunk
//              boundaries are uneven (up to 2n/3 sent per round where the middle sends n/2)
//   builtin    MPI_Reduce_scatter, MPI_Allgatherv; on the GPU, one ncclReduce to each
//              chunk's rank and one ncclBroadcast from it, grouped (ncclReduceScatter
//              and ncclAllGather need chunks of one size)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <ddl/core/tensor.hpp>
#include <ddl/parallel/collectives/allreduce_algorithm.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>

namespace ddl::parallel {

// How values travel: as float32, or compressed to IEEE float16 (half the
// bytes; about 3 significant digits, magnitudes up to 65504). Sums are
// still taken in float32 on arrival. Only the ring offers float16.
enum class WireFormat { float32, float16 };

// Sums (or averages) `data` over the ranks of `comm`, in place. float16 on
// the wire needs the ring (ddl::Error otherwise).
void allreduce(const Communicator& comm, std::span<float> data, AllreduceAlgorithm algorithm,
               WireFormat wire = WireFormat::float32, ReduceOp op = ReduceOp::sum);
// The same on a float32 tensor (CUDA: through a host copy).
void allreduce(const Communicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm,
               ReduceOp op = ReduceOp::sum);
// The same on a float32 tensor on the communicator's GPU, device-resident:
// ring, rhd, tree and naive over NCCL's point-to-point messages with their
// sums as CUDA kernels; builtin is ncclAllReduce; shm has no GPU form
// (ddl::Error). Returns once the result is in `tensor`, within the stall
// timeout, as NcclCommunicator's calls do.
void allreduce(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm,
               ReduceOp op = ReduceOp::sum);

// The algorithms one by one (allreduce() dispatches to them).
// With float16 on the wire every rank ends with the same values: the owner
// of each chunk rounds its sum to float16 too before the allgather.
void ring_allreduce(const Communicator& comm, std::span<float> data, WireFormat wire = WireFormat::float32);
void halving_doubling_allreduce(const Communicator& comm, std::span<float> data);
void tree_allreduce(const Communicator& comm, std::span<float> data);
void naive_allreduce(const Communicator& comm, std::span<float> data);
// Every rank on one node (ddl::Error otherwise): through an MPI-3
// shared-memory window, one segment at a time. A communicator runs one
// collective at a time; this one keeps its window between calls.
void shared_memory_allreduce(const Communicator& comm, std::span<float> data);
void builtin_allreduce(const Communicator& comm, std::span<float> data);
// Across nodes (hierarchical.cpp): each node's ranks reduce onto its
// leader, the leaders (one per node) allreduce by the ring, and each leader
// broadcasts through its node, so only the leaders' messages cross between
// nodes. Nodes as Communicator::node() finds them; the second form takes
// the two levels explicitly: `node`, this rank's node (its rank 0 is the
// leader), and `leaders`, read on leaders only, one rank per node; every
// rank of `comm` in exactly one node.
void hierarchical_allreduce(const Communicator& comm, std::span<float> data, ReduceOp op = ReduceOp::sum);
void hierarchical_allreduce(const Communicator& comm, const Communicator& node, const Communicator& leaders,
                            std::span<float> data, ReduceOp op = ReduceOp::sum);

// Reduce-scatter and allgather by name, in place on a buffer of n elements
// cut into p chunks of n/p (the first n mod p one longer, chunk_range()
// below):
//   reduce_scatter: afterwards rank r's chunk r holds the sum (or the
//     average) over the ranks; the other chunks are left with partial
//     sums or this rank's own values, which nothing should read.
//   allgather: rank r's chunk r is copied into chunk r of every rank.
// ring, rhd and builtin only (has_halves; ddl::Error for the others).
// Every rank calls them with the same n.
bool has_halves(AllreduceAlgorithm algorithm);
void reduce_scatter(const Communicator& comm, std::span<float> data, AllreduceAlgorithm algorithm,
                    ReduceOp op = ReduceOp::sum);
void allgather(const Communicator& comm, std::span<float> data, AllreduceAlgorithm algorithm);
// The allgather of a float32 tensor (CUDA: through a host copy).
void allgather(const Communicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm);
// The halves on a float32 tensor on the communicator's GPU, device-resident
// as allreduce(NcclCommunicator, ...) is, with the same chunks; returning
// once the result is in `tensor`.
void reduce_scatter(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm,
                    ReduceOp op = ReduceOp::sum);
void allgather(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm);

// The halves one by one (float16 on the wire for the ring only).
void ring_reduce_scatter(const Communicator& comm, std::span<float> data, WireFormat wire = WireFormat::float32,
                         ReduceOp op = ReduceOp::sum);
void ring_allgather(const Communicator& comm, std::span<float> data, WireFormat wire = WireFormat::float32);
void halving_reduce_scatter(const Communicator& comm, std::span<float> data, ReduceOp op = ReduceOp::sum);
void doubling_allgather(const Communicator& comm, std::span<float> data);
// MPI's own, MPI_Reduce_scatter and MPI_Allgatherv: chunks of at most
// INT_MAX elements, and for the allgather a buffer of at most INT_MAX
// (MPI's counts and offsets are ints; ddl::Error beyond).
void builtin_reduce_scatter(const Communicator& comm, std::span<float> data, ReduceOp op = ReduceOp::sum);
void builtin_allgather(const Communicator& comm, std::span<float> data);

// Root's `data` copied to every rank, down a binomial tree (log2 p rounds).
void tree_broadcast(const Communicator& comm, std::span<float> data, int root);

// [begin, end) of chunk `index` when n elements are cut into `parts` chunks.
struct ChunkRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};
ChunkRange chunk_range(std::int64_t n, int parts, int index);

}  // namespace ddl::parallel
