// Communicator: a group of processes (ranks) that exchange messages, over
// MPI. Rank, size, the rank on this node (which picks the GPU), barrier,
// split, and point-to-point messages of tensors or raw host bytes, blocking
// or not. CUDA tensors are staged through host memory, since MPI may not be
// CUDA-aware.
//
// Waiting is bounded: a blocking call, a Request::wait or a barrier that has
// not completed after the stall timeout (DDL_STALL_TIMEOUT seconds, default
// 60, as Horovod's stall warning) prints which rank and which peer are stuck
// on what, and aborts the whole job instead of hanging forever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <ddl/core/tensor.hpp>

namespace ddl::parallel {

namespace detail {
struct CommunicatorState;
struct RequestState;
}  // namespace detail

// A message in flight (MPI_Isend / MPI_Irecv). wait() blocks until it is
// done; destroying an unfinished request waits for it, so its buffer is never
// freed under MPI's feet.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&&) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  void wait();
  bool test();  // true once done
  bool pending() const { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::RequestState> state_;
};

// A tensor in flight between ranks: the request and the host memory it
// uses, which lives as long as the message.
struct TensorMessage {
  Tensor host;
  Request request;
};

class Communicator {
 public:
  // Every process of the job (MPI_COMM_WORLD); initialises MPI on first use
  // (thread level MPI_THREAD_MULTIPLE, needed by communication threads).
  static Communicator world();
  // Whether this process was started as one of several ranks: MPI is
  // initialised, or a launcher's environment (mpiexec, srun) says so.
  static bool launched_by_mpi();
  // Whether this ddl was built with MPI (false: mpi_unavailable.cpp, where
  // no communicator can be made and launched_by_mpi() is always false).
  static bool built();

  int rank() const;
  int size() const;
  // The rank among the processes on this node, and how many there are
  // (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED): one GPU per local rank.
  int local_rank() const;
  int local_size() const;
  // "rank 1 of 4 on node-a"
  std::string describe() const;
  // Which ranks run on which node (hostname), in rank order: "ranks 0-1 on
  // node-a, ranks 2-3 on node-b".
  std::string describe_nodes() const;
  // The hostname of `rank` (of this communicator), as it was when the
  // communicator was made.
  const std::string& host(int rank) const;
  // The job-wide rank (MPI_COMM_WORLD's) of `rank` of this communicator:
  // the number messages give a rank, as the launcher numbers it.
  int world_rank(int rank) const;

  void barrier() const;
  // Ranks with the same color form a new communicator, ordered by key then
  // by rank in this one (MPI_Comm_split).
  Communicator split(int color, int key) const;
  // The two levels of a job on several nodes (the hierarchical allreduce's):
  // node() holds the ranks of this rank's node, in this communicator's
  // order (its rank is local_rank()); across_nodes() the ranks of every
  // node with this rank's local rank, in node order, so for local rank 0
  // one leader per node. Each is made on its first call, which every rank
  // makes together (a collective), and kept with this communicator.
  Communicator node() const;
  Communicator across_nodes() const;

  // Raw host bytes to / from rank `peer`.
  void send(std::span<const std::byte> bytes, int peer, int tag = 0) const;
  void recv(std::span<std::byte> bytes, int peer, int tag = 0) const;
  Request isend(std::span<const std::byte> bytes, int peer, int tag = 0) const;
  Request irecv(std::span<std::byte> bytes, int peer, int tag = 0) const;
  // Sends `send` to rank `to` while receiving `receive` from rank `from`
  // (MPI_Sendrecv, under the stall timeout): one step of a ring.
  void sendrecv(std::span<const std::byte> send, int to, std::span<std::byte> receive, int from, int tag = 0) const;
  // The rank that has sent a message with `tag` not yet received, if any
  // (MPI_Iprobe from any source): how a server finds the next request
  // without posting receives it may never need.
  std::optional<int> probe_any(int tag) const;

  // A tensor's elements to / from `peer`. The receiver's tensor must already
  // have the sender's shape and dtype (the byte counts are checked by MPI:
  // a longer message is an error naming both ranks). CUDA tensors go through
  // a host copy.
  void send(const Tensor& tensor, int peer, int tag = 0) const;
  void recv(const Tensor& tensor, int peer, int tag = 0) const;
  // The same without waiting. The message keeps the host memory it reads or
  // fills: the tensor itself on the CPU (do not change it before the send
  // completes), a staging copy for a CUDA tensor. A receive fills a new
  // host tensor of `shape` and `dtype`; wait, then read message.host.
  TensorMessage isend(const Tensor& tensor, int peer, int tag = 0) const;
  TensorMessage irecv(const Shape& shape, DType dtype, int peer, int tag = 0) const;

  // The sum of `values` over the ranks, in place (MPI_Allreduce on doubles):
  // for metrics and small bookkeeping, not for gradients.
  void sum_doubles(std::span<double> values) const;
  // `bytes` of every rank, concatenated in rank order (MPI_Allgather);
  // every rank must pass the same byte count.
  std::vector<std::byte> allgather_bytes(std::span<const std::byte> bytes) const;
  // Root's `bytes` copied to every rank (MPI_Bcast); same size on every rank.
  void broadcast_bytes(std::span<std::byte> bytes, int root) const;

  // The bytes this rank has posted in point-to-point sends on this
  // communicator, its node() and its across_nodes() (copies of it share
  // the count) since it was made: every
  // message of the collectives written on them (ring, rhd, tree, naive, hierarchical),
  // none of MPI's own collectives (builtin, sum_doubles, allgather_bytes,
  // broadcast_bytes), whose traffic MPI does not tell. What a lesson
  // compares with the algorithms' formulas.
  std::int64_t bytes_sent() const;

  // Ends the whole job with `message` printed by this rank (MPI_Abort):
  // what a rank does when it cannot go on and the others would hang.
  [[noreturn]] void abort(const std::string& message, int code = 1) const;

  // Internal: for the MPI-based collectives.
  const std::shared_ptr<detail::CommunicatorState>& state() const { return state_; }

 private:
  explicit Communicator(std::shared_ptr<detail::CommunicatorState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::CommunicatorState> state_;
};

}  // namespace ddl::parallel
