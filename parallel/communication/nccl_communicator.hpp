// NcclCommunicator: NCCL's collectives on CUDA tensors, for ranks that each
// drive one GPU. MPI starts it, as Horovod and PyTorch do: rank 0 asks NCCL
// for a unique id, the MPI Communicator broadcasts the id's bytes, and every
// rank joins with ncclCommInitRank. Each rank uses the GPU numbered by its
// rank on the node (Communicator::local_rank), so launch one rank per GPU.
//
// Streams: NCCL works on a stream of its own. Before each operation it
// waits for an event recorded on ddl's compute stream of the device (so it
// reads the tensor only after the kernels that wrote it), and the calls
// below return when NCCL is done, so compute queued afterwards sees the
// result. The wait is bounded: an asynchronous NCCL or CUDA error aborts the
// NCCL communicator and throws a ddl::Error naming the rank and operation;
// past DDL_STALL_TIMEOUT the NCCL communicator is aborted and the job ended
// with the same names, instead of hanging.
//
// Without NCCL in the build, or without a GPU for some rank, create() throws
// a ddl::Error on every rank saying which. This project's GPU machines have
// one GPU, so the NCCL calls have run with one rank; the exchanges between
// ranks (two GPUs or more) have been compiled, not run.
//
// collectives.hpp's allreduce(NcclCommunicator, ...) runs ddl's own
// algorithms (ring, rhd, tree, naive) on the GPU over this communicator's
// point-to-point messages. Their buffer for the values received is the
// communicator's, kept until it is destroyed: as large as the largest
// tensor reduced with rhd, tree or naive, or that tensor's ring chunk
// (1/size of it) with the ring.
#pragma once

#include <memory>
#include <optional>

#include <ddl/core/tensor.hpp>
#include <ddl/parallel/collectives/allreduce_algorithm.hpp>
#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

// A point-to-point message queued on NCCL's stream (send_async,
// recv_async): wait() returns once it is done, within the stall timeout; the
// tensor must live until then. Destroying an unfinished message waits.
class NcclMessage {
 public:
  NcclMessage() = default;
  NcclMessage(NcclMessage&&) noexcept;
  NcclMessage& operator=(NcclMessage&&) noexcept;
  NcclMessage(const NcclMessage&) = delete;
  NcclMessage& operator=(const NcclMessage&) = delete;
  ~NcclMessage();

  void wait();
  bool pending() const { return state_ != nullptr; }

  struct State;

 private:
  friend class NcclCommunicator;
  explicit NcclMessage(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

class NcclCommunicator {
 public:
  // Collective over `mpi`'s ranks: every rank must call it. Each rank drives
  // `device` (default: local_gpu_index, its node-local rank's GPU or the only
  // one it sees); two ranks on one physical GPU are refused on every rank.
  static NcclCommunicator create(const Communicator& mpi, std::optional<int> device = std::nullopt);
  // Whether ddl was built with NCCL.
  static bool built();

  int rank() const;
  int size() const;
  int device() const;  // the CUDA device index this rank uses

  // These block the calling thread until NCCL's work is done on the GPU
  // (after the compute stream's work queued so far, which NCCL waits for),
  // so compute queued afterwards sees the result. The stall timeout counts
  // from when that earlier compute is done, so a long kernel before a
  // collective is not taken for a missing peer.
  //
  // Sum (or average: ncclAvg) over the ranks, in place: a float32 tensor
  // on device().
  void allreduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum) const;
  // Root's values into every rank's `tensor` (same shape everywhere).
  void broadcast(const Tensor& tensor, int root) const;
  // Point-to-point; the receiver's tensor has the sender's shape and dtype.
  // A blocking send returns only once its receive has run, so two ranks
  // that both send first wait for each other until the stall timeout: use
  // sendrecv for an exchange.
  void send(const Tensor& tensor, int peer) const;
  void recv(const Tensor& tensor, int peer) const;
  // Sends `outgoing` to `to` and receives `incoming` from `from` as one
  // NCCL group, so every rank of a ring or a pair can call it at once.
  void sendrecv(const Tensor& outgoing, int to, const Tensor& incoming, int from) const;
  // Send and receive without blocking: queued on NCCL's stream after the
  // compute stream's work so far. Messages with one peer are matched in the
  // order they are queued, so each side queues them in one order (a
  // pipeline uses one communicator per direction of each link for this).
  NcclMessage send_async(const Tensor& tensor, int peer) const;
  NcclMessage recv_async(const Tensor& tensor, int peer) const;

  struct State;
  // Internal: for the device-resident collectives (collectives/transport.hpp).
  const std::shared_ptr<State>& state() const { return state_; }

 private:
  explicit NcclCommunicator(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace ddl::parallel
