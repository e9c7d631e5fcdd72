// Internal to the collectives: what an allreduce algorithm asks of the
// network and of the memory its buffer lives in, so that each algorithm is
// written once (ring.cpp, halving_doubling.cpp, tree.cpp, naive.cpp) and
// runs on host buffers over MPI and on GPU buffers over NCCL.
//
// A transport offers, with `data` pointers into the buffer being reduced:
//
//   rank(), size()
//   exchange_add(send, n_send, to, target, n_recv, from, tag)
//       sends send[0, n_send) to rank `to` while receiving n_recv values
//       from rank `from` and adding them into target[0, n_recv);
//   exchange(send, n_send, to, receive, n_recv, from, tag)
//       the same, the values received replacing receive[0, n_recv);
//   complete(data, n, op)
//       data[0, n) now holds the sum over every rank, on this rank only:
//       average it if `op` asks, and make it what the other ranks will
//       receive (float16 on the wire: rounded), so every rank ends with the
//       same bits.
//
// Either count may be 0: that direction sends no message (the peer's
// matching call has 0 too). Tags keep the phases of one algorithm apart on
// MPI; NCCL matches messages between two ranks by their order instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ddl/core/cuda/compute_mark.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/parallel/collectives/allreduce_algorithm.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/collectives/half.hpp>
#include <ddl/parallel/collectives/local_reduce.hpp>
#include <ddl/parallel/collectives/segments.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>

namespace ddl::parallel::detail {

// What ReduceOp::average multiplies the sum by.
inline float average_factor(int ranks) { return 1.0f / static_cast<float>(ranks); }

// Host memory over MPI: messages stream in segments (segments.hpp), and
// each segment is added on this thread as it arrives.
class HostTransport {
 public:
  HostTransport(const Communicator& comm, WireFormat wire) : comm_(comm), wire_(wire) {}

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  void exchange_add(const float* send, std::int64_t n_send, int to, float* target, std::int64_t n_recv, int from,
                    int tag) const {
    exchange_segments(
        comm_, send, n_send, to, n_recv, from, tag,
        [target](std::int64_t offset, const float* segment, std::int64_t count) {
          add_into(target + offset, segment, count);
        },
        wire_);
  }

  void exchange(const float* send, std::int64_t n_send, int to, float* receive, std::int64_t n_recv, int from,
                int tag) const {
    exchange_into(comm_, send, n_send, to, receive, n_recv, from, tag, wire_);
  }

  void complete(float* data, std::int64_t n, ReduceOp op) const {
    if (size() == 1) return;  // nothing travelled: the values are this rank's own
    if (op == ReduceOp::average) scale(data, n, average_factor(size()));
    if (wire_ == WireFormat::float16 && n > 0) {
      std::vector<std::uint16_t> bits(static_cast<std::size_t>(n));
      encode_half(data, bits.data(), n);
      decode_half(bits.data(), data, n);
    }
  }

 private:
  const Communicator& comm_;
  WireFormat wire_;
};

// GPU memory over NCCL: every message and every sum is queued on NCCL's
// stream, in the algorithm's order, after the buffer's writers: those
// `written` marks, or (nullptr) all the compute queued before the
// collective began. The host does not wait between steps. Received values
// to add land in the communicator's scratch buffer, kept as long as the
// largest such message, which a CUDA kernel (the Add functor) then adds
// into the buffer. After each exchange the host waits only until NCCL has
// queued it (a nonblocking communicator's rule); finish() waits for the
// whole collective, within the stall timeout. A transport destroyed
// unfinished (an error on the way) aborts the NCCL communicator, whose
// messages no longer match the other ranks', and waits for the queued work.
// Defined with the NcclCommunicator (nccl_communicator.cpp).
class NcclTransport {
 public:
  NcclTransport(const NcclCommunicator& comm, std::string what, std::int64_t scratch_elements,
                cuda_backend::ComputeMark* written = nullptr);
  ~NcclTransport();
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  int rank() const;
  int size() const;
  void exchange_add(const float* send, std::int64_t n_send, int to, float* target, std::int64_t n_recv, int from,
                    int tag);
  void exchange(const float* send, std::int64_t n_send, int to, float* receive, std::int64_t n_recv, int from, int tag);
  void complete(float* data, std::int64_t n, ReduceOp op);
  // NCCL's own allreduce of data[0, n), in place, for the builtin algorithm,
  // and its halves on chunk_range's chunks: chunk r reduced onto rank r,
  // and broadcast from it.
  void allreduce(float* data, std::int64_t n, ReduceOp op);
  void reduce_scatter(float* data, std::int64_t n, ReduceOp op);
  void allgather(float* data, std::int64_t n);
  void finish();

 private:
  std::shared_ptr<NcclCommunicator::State> state_;
  std::string what_;
  cuda_backend::ComputeMark* written_;
  bool finished_ = false;
};

// allreduce(NcclCommunicator, ...) of collectives.hpp on a tensor whose
// writers `written` marks: NCCL's work waits for them alone, not for the
// compute queued since, so a data-parallel bucket is reduced while backward
// still computes the gradients of earlier layers. nullptr: it waits for all
// the compute queued so far, as the public call does.
void allreduce_after(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm, ReduceOp op,
                     cuda_backend::ComputeMark* written);
// The same for reduce_scatter(NcclCommunicator, ...): a sharded bucket.
void reduce_scatter_after(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm, ReduceOp op,
                          cuda_backend::ComputeMark* written);

// The algorithms over either transport (explicitly instantiated for both
// in their files). `data` holds n floats in the transport's memory.
template <class Transport>
void ring_reduce_scatter(Transport& transport, float* data, std::int64_t n);
template <class Transport>
void ring_allgather(Transport& transport, float* data, std::int64_t n);
template <class Transport>
void ring_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op);
template <class Transport>
void halving_doubling_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op);
template <class Transport>
void halving_reduce_scatter(Transport& transport, float* data, std::int64_t n, ReduceOp op);
template <class Transport>
void doubling_allgather(Transport& transport, float* data, std::int64_t n);
template <class Transport>
void tree_broadcast(Transport& transport, float* data, std::int64_t n, int root);
// The sum of every rank's data[0, n) onto rank 0 (the others' data are
// left with partial sums).
template <class Transport>
void tree_reduce(Transport& transport, float* data, std::int64_t n);
template <class Transport>
void tree_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op);
template <class Transport>
void naive_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op);

// Instantiates one algorithm template for both transports.
#define DDL_FOR_BOTH_TRANSPORTS(name, ...)                        \
  template void name<HostTransport>(HostTransport&, __VA_ARGS__); \
  template void name<NcclTransport>(NcclTransport&, __VA_ARGS__);

}  // namespace ddl::parallel::detail
