// NcclCommunicator over NCCL (see nccl_communicator.hpp). Built only with
// NCCL; nccl_unavailable.cpp stands in otherwise.
#include <ddl/parallel/communication/nccl_communicator.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <fmt/ranges.h>

#include <ddl/core/check.hpp>
#include <ddl/core/cuda/compute_mark.hpp>
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/functors.hpp>
#include <ddl/core/kernels.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/collectives/transport.hpp>
#include <ddl/parallel/config.hpp>

namespace ddl::parallel {
namespace {

// What went wrong in an NCCL call made by `rank`, or empty if nothing did
// (ncclInProgress is how a nonblocking communicator's calls succeed).
std::string nccl_problem(ncclResult_t result, const char* call, int rank) {
  if (result == ncclSuccess || result == ncclInProgress) return {};
  return fmt::format("NcclCommunicator: {} failed on rank {}: {}", call, rank, ncclGetErrorString(result));
}

// Why this rank cannot drive `device`, if it cannot.
std::string missing_gpu(const Communicator& mpi, int device, bool chosen) {
  const int devices = cuda_backend::device_count();
  if (devices == 0) {
    return fmt::format(
        "NcclCommunicator: rank {} (rank {} on its node) sees no CUDA device ({}); NCCL needs one GPU "
        "per rank on a node",
        mpi.rank(), mpi.local_rank(), cuda_backend::unavailable_reason());
  }
  if (chosen && device >= devices) {
    return fmt::format("NcclCommunicator: rank {} was given cuda:{}, but its node has {} GPU(s)", mpi.rank(), device,
                       devices);
  }
  if (!chosen && local_gpu_index(mpi) >= devices) {
    return fmt::format(
        "NcclCommunicator: rank {} is rank {} on its node, but the node has {} GPU(s); NCCL needs one "
        "GPU per rank on a node: launch at most {} rank(s) per node",
        mpi.rank(), mpi.local_rank(), devices, devices);
  }
  return {};
}

// Collective: why this rank cannot join, if it shares its GPU with another
// rank (NCCL refuses two ranks of a communicator on one GPU).
std::string shared_gpu(const Communicator& mpi, int device) {
  const std::vector<std::string> uuids = gather_gpu_uuids(mpi, device);
  std::vector<int> sharing;
  for (int r = 0; r < mpi.size(); ++r) {
    if (uuids[static_cast<std::size_t>(r)] == uuids[static_cast<std::size_t>(mpi.rank())]) sharing.push_back(r);
  }
  if (sharing.size() == 1) return {};
  return fmt::format("NcclCommunicator: ranks {} all drive GPU {} (cuda:{} on rank {}); NCCL needs a GPU of its own "
                     "per rank (reduce over MPI instead, e.g. ddl-train --allreduce ring, for ranks that share one)",
                     fmt::join(sharing, ", "), uuids[static_cast<std::size_t>(mpi.rank())], device, mpi.rank());
}

// Calls `done` every 20 us until it returns true, or until the stall
// timeout passes (then false): a nonblocking NCCL communicator's calls
// return at once and are finished only when polled to say so.
template <class Done>
bool poll_within_stall_timeout(Done done) {
  const double timeout = config::stall_timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  while (!done()) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

// Runs `queue(keep)` inside one NCCL group, which starts as a whole at
// ncclGroupEnd; `queue` hands each call's result to `keep`. Returns the
// first failure (a nonblocking communicator answers ncclInProgress for a
// call it has taken).
template <class Queue>
ncclResult_t in_group(Queue queue) {
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  const auto keep_first = [&](ncclResult_t next) {
    if (result == ncclSuccess || result == ncclInProgress) result = next;
  };
  queue(keep_first);
  keep_first(ncclGroupEnd());
  return result;
}

// Sends `send_bytes` to `to` and receives `receive_bytes` from `from` as one
// group, so neither side's send waits for its receive to be posted first.
// An empty direction is left out.
ncclResult_t grouped_exchange(const void* send, std::size_t send_bytes, int to, void* receive,
                              std::size_t receive_bytes, int from, ncclComm_t comm, cudaStream_t stream) {
  return in_group([&](const auto& keep) {
    if (send_bytes > 0) keep(ncclSend(send, send_bytes, ncclUint8, to, comm, stream));
    if (receive_bytes > 0) keep(ncclRecv(receive, receive_bytes, ncclUint8, from, comm, stream));
  });
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::average ? ncclAvg : ncclSum; }

// Queues NCCL's sum (or average) of n floats at `data`, in place.
ncclResult_t queue_allreduce(void* data, std::int64_t n, ReduceOp op, ncclComm_t comm, cudaStream_t stream) {
  return ncclAllReduce(data, data, static_cast<std::size_t>(n), ncclFloat, nccl_op(op), comm, stream);
}

// Queues `queue_chunk(chunk, r)` for each non-empty chunk r of n elements
// over `ranks`, as one group: the ranks' calls for a chunk match up
// whatever order each reaches them in.
template <class QueueChunk>
ncclResult_t grouped_chunks(std::int64_t n, int ranks, QueueChunk queue_chunk) {
  return in_group([&](const auto& keep) {
    for (int r = 0; r < ranks; ++r) {
      const ChunkRange chunk = chunk_range(n, ranks, r);
      if (chunk.size() > 0) keep(queue_chunk(chunk, r));
    }
  });
}

}  // namespace

struct NcclCommunicator::State {
  Communicator mpi;
  int rank = 0, size = 1, device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;       // NCCL's own
  cudaEvent_t inputs_ready = nullptr;  // recorded on the compute stream by follow_compute()
  // ddl's algorithms' buffer for the values they receive (reserve_scratch).
  Tensor scratch;

  explicit State(Communicator communicator) : mpi(std::move(communicator)) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // Releases what create() made, ignoring errors: destructors must not throw.
  // A nonblocking communicator is finalized first (its pending work flushed,
  // within the stall timeout) and aborted if that does not finish.
  ~State() {
    if (comm == nullptr && stream == nullptr && inputs_ready == nullptr) return;
    std::optional<cuda_backend::DeviceGuard> guard;
    try {
      guard.emplace(device);
    } catch (const std::exception&) {  // a destructor must not throw: release what can be on the current device
    }
    if (comm != nullptr) {
      if (ncclCommFinalize(comm) == ncclSuccess || settled(comm) == ncclSuccess) {
        ncclCommDestroy(comm);
      } else {
        ncclCommAbort(comm);
      }
    }
    if (inputs_ready != nullptr) cudaEventDestroy(inputs_ready);
    if (stream != nullptr) {
      cudaStreamSynchronize(stream);  // the scratch buffer goes back to the pool after the work that uses it
      cudaStreamDestroy(stream);
    }
    scratch = Tensor();
  }

  // The state of a nonblocking communicator's last call once it is no longer
  // ncclInProgress, or ncclInProgress if that takes longer than the timeout.
  static ncclResult_t settled(ncclComm_t handle) {
    ncclResult_t state = ncclInProgress;
    poll_within_stall_timeout([&] {
      if (ncclCommGetAsyncError(handle, &state) != ncclSuccess) state = ncclInternalError;
      return state != ncclInProgress;
    });
    return state;
  }

  void check(const Tensor& tensor, const char* what) const {
    DDL_CHECK(comm != nullptr, "NcclCommunicator::{}: rank {}'s NCCL communicator was aborted after an earlier error",
              what, rank);
    DDL_CHECK(tensor.defined(), "NcclCommunicator::{}: the tensor is undefined", what);
    DDL_CHECK(tensor.device() == cuda(device),
              "NcclCommunicator::{}: rank {} uses cuda:{}, but the tensor of shape {} is on {}", what, rank, device,
              tensor.shape(), tensor.device());
  }

  // A point-to-point message needs another rank of this communicator.
  void check_peer_to_peer(const Tensor& tensor, int peer, const char* what, const char* verb) const {
    check(tensor, what);
    DDL_CHECK(peer >= 0 && peer < size && peer != rank, "NcclCommunicator::{}: rank {} cannot {} rank {} of {}", what,
              rank, verb, peer, size);
  }

  // Makes NCCL's stream wait for the compute stream's work so far (recording
  // `inputs_ready`, and `also_ready` if given: a queued message's own mark).
  void follow_compute(cudaEvent_t also_ready = nullptr) {
    const cuda_backend::DeviceGuard guard(device);
    DDL_CUDA_CHECK(device, cudaEventRecord(inputs_ready, cuda_backend::stream(device).handle));
    if (also_ready != nullptr) DDL_CUDA_CHECK(device, cudaEventRecord(also_ready, cuda_backend::stream(device).handle));
    DDL_CUDA_CHECK(device, cudaStreamWaitEvent(stream, inputs_ready, 0));
  }

  // Calls `operation` (NCCL calls on NCCL's stream); returns once NCCL has
  // accepted it (a nonblocking communicator's call may still be in progress).
  template <class Operation>
  void submit(const std::string& what, Operation operation) {
    const cuda_backend::DeviceGuard guard(device);
    const ncclResult_t queued = operation();
    if (queued != ncclSuccess && queued != ncclInProgress) abort_and_throw(what, ncclGetErrorString(queued));
  }

  // Makes NCCL's stream wait for an operation's inputs: for the writers
  // `written` marks, or (nullptr) for the compute stream's work so far.
  void follow(cuda_backend::ComputeMark* written) {
    if (written == nullptr) return follow_compute();
    written->order_before(stream);
  }

  // Keeps `scratch` at least `elements` long. It is held from one collective
  // to the next rather than taken from the pool each time, because the pool
  // hands a block out again in the compute stream's order while NCCL's
  // stream may be waiting for a mark far behind the compute queued so far.
  // Returns whether it was (re)made: the compute that last used a block new
  // from the pool may still be queued, and must be waited for in full.
  bool reserve_scratch(std::int64_t elements) {
    if (elements <= (scratch.defined() ? scratch.numel() : 0)) return false;
    scratch = Tensor();  // free: each collective that used it finished, or aborted and synchronized
    scratch = Tensor::empty({elements}, {DType::Float32, cuda(device), false});
    return true;
  }

  // Queues `operation` on NCCL's stream after the compute stream's work so far.
  template <class Operation>
  void queue(const std::string& what, Operation operation, cudaEvent_t also_ready = nullptr) {
    follow_compute(also_ready);
    submit(what, operation);
  }

  // Waits for everything queued since follow(written): first for the
  // compute that came before (no peer's fault, however long it takes), then
  // for NCCL's part within the stall timeout.
  void finish(const std::string& what, const cuda_backend::ComputeMark* written = nullptr) {
    if (written != nullptr) {
      written->synchronize();
    } else {
      DDL_CUDA_CHECK(device, cudaEventSynchronize(inputs_ready));
    }
    wait(what, true);
  }

  // queue(), then finish(). The host's wait is what orders NCCL's result
  // before later compute: kernels queued on the compute stream after this
  // returns start after NCCL has finished, so no event back to the compute
  // stream is needed.
  template <class Operation>
  void run(const std::string& what, Operation operation) {
    queue(what, operation);
    finish(what);
  }

  // NCCL's loop for a nonblocking communicator: its calls return at once
  // (ncclInProgress) and ncclCommGetAsyncError says when NCCL has finished
  // its part or failed; then NCCL's stream says when the GPU's part is done
  // (skipped for the bootstrap, which queues no GPU work). A peer that
  // fails or never comes finishes neither, hence the stall timeout.
  // `until` (an event recorded after the operation) instead of the whole
  // stream marks the GPU's part of one queued message.
  void wait(const std::string& what, bool on_stream, cudaEvent_t until = nullptr) {
    const bool done = poll_within_stall_timeout([&] {
      ncclResult_t async = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(comm, &async);
      if (queried != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
        abort_and_throw(what, ncclGetErrorString(queried != ncclSuccess ? queried : async));
      }
      if (async == ncclInProgress) return false;
      if (!on_stream) return true;
      const cudaError_t status = until != nullptr ? cudaEventQuery(until) : cudaStreamQuery(stream);
      if (status != cudaSuccess && status != cudaErrorNotReady) {
        abort_and_throw(what, fmt::format("{}: {}", cudaGetErrorName(status), cudaGetErrorString(status)));
      }
      return status == cudaSuccess;
    });
    if (done) return;
    ncclCommAbort(comm);
    mpi.abort(
        fmt::format("stalled: NCCL {} has not completed within DDL_STALL_TIMEOUT={:g} s; a rank is missing, "
                    "stuck or took a different path; aborting every rank",
                    what, config::stall_timeout_seconds()));
  }

  // After an error NCCL's communicator is unusable and must be aborted, not
  // destroyed (ncclCommDestroy would wait for work that never ends).
  [[noreturn]] void abort_and_throw(const std::string& what, const std::string& reason) {
    ncclCommAbort(comm);
    comm = nullptr;
    throw Error(fmt::format("NCCL {} failed on rank {} (cuda:{}): {}; the NCCL communicator is aborted", what, rank,
                            device, reason));
  }
};

// A queued message: the communicator that carries it, an event recorded on
// the compute stream when it was queued (what NCCL waits for first) and one
// on NCCL's stream right after it.
struct NcclMessage::State {
  std::shared_ptr<NcclCommunicator::State> comm;
  cudaEvent_t inputs_ready = nullptr, done = nullptr;
  std::string what;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (inputs_ready != nullptr) cudaEventDestroy(inputs_ready);
    if (done != nullptr) cudaEventDestroy(done);
  }
};

NcclMessage::NcclMessage(std::shared_ptr<State> state) : state_(std::move(state)) {}
NcclMessage::NcclMessage(NcclMessage&&) noexcept = default;

NcclMessage& NcclMessage::operator=(NcclMessage&& other) noexcept {
  if (this != &other) {
    try {
      wait();
    } catch (...) {  // a move must not throw; the error already reached the waiter or is lost with the message
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

NcclMessage::~NcclMessage() {
  try {
    wait();
  } catch (...) {  // destructors must not throw: an unwaited message's error is dropped with it
  }
}

void NcclMessage::wait() {
  if (!state_) return;
  const std::shared_ptr<State> state = std::move(state_);
  NcclCommunicator::State& comm = *state->comm;
  const cuda_backend::DeviceGuard guard(comm.device);
  // The stall clock starts once the compute queued before the message is
  // done, as in NcclCommunicator::State::run.
  DDL_CUDA_CHECK(comm.device, cudaEventSynchronize(state->inputs_ready));
  if (comm.comm != nullptr) comm.wait(state->what, true, state->done);
}

bool NcclCommunicator::built() { return true; }

NcclCommunicator NcclCommunicator::create(const Communicator& mpi, std::optional<int> device) {
  // The ranks first agree that each has its GPU, so one rank's error is an
  // error on every rank instead of the others stalling in the bootstrap.
  const int gpu = device.value_or(local_gpu_index(mpi));
  agree_all_can_proceed(mpi, missing_gpu(mpi, gpu, device.has_value()), "NcclCommunicator: finding each rank's GPU");
  agree_all_can_proceed(mpi, shared_gpu(mpi, gpu), "NcclCommunicator: checking that no two ranks share a GPU");
  auto state = std::make_shared<State>(mpi);
  State& s = *state;
  s.rank = mpi.rank();
  s.size = mpi.size();
  s.device = gpu;
  const cuda_backend::DeviceGuard guard(s.device);
  ncclUniqueId id{};
  agree_all_can_proceed(mpi, s.rank == 0 ? nccl_problem(ncclGetUniqueId(&id), "ncclGetUniqueId", 0) : std::string(),
                        "NcclCommunicator: making the bootstrap id");
  mpi.broadcast_bytes(std::as_writable_bytes(std::span<ncclUniqueId>(&id, 1)), 0);
  // Nonblocking, so a bootstrap that one rank never completes times out
  // like any other stall instead of hanging every rank.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const std::string problem =
      nccl_problem(ncclCommInitRankConfig(&s.comm, s.size, id, s.rank, &config), "ncclCommInitRankConfig", s.rank);
  if (!problem.empty()) s.comm = nullptr;
  try {
    agree_all_can_proceed(mpi, problem, "NcclCommunicator: starting NCCL");
  } catch (const Error&) {
    if (s.comm != nullptr) ncclCommAbort(std::exchange(s.comm, nullptr));  // its peers will never join it
    throw;
  }
  s.wait(fmt::format("bootstrap of {} ranks", s.size), false);
  DDL_CUDA_CHECK(s.device, cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  DDL_CUDA_CHECK(s.device, cudaEventCreateWithFlags(&s.inputs_ready, cudaEventDisableTiming));
  return NcclCommunicator(std::move(state));
}

int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }
int NcclCommunicator::device() const { return state_->device; }

void NcclCommunicator::allreduce(const Tensor& tensor, ReduceOp op) const {
  State& s = *state_;
  s.check(tensor, "allreduce");
  DDL_CHECK(tensor.dtype() == DType::Float32, "NcclCommunicator::allreduce: needs a float32 tensor, got {} {}",
            tensor.dtype(), tensor.shape());
  s.run(fmt::format("allreduce of {} floats", tensor.numel()),
        [&] { return queue_allreduce(tensor.raw_data(), tensor.numel(), op, s.comm, s.stream); });
}

void NcclCommunicator::broadcast(const Tensor& tensor, int root) const {
  State& s = *state_;
  s.check(tensor, "broadcast");
  DDL_CHECK(root >= 0 && root < s.size, "NcclCommunicator::broadcast: root {} is not a rank of {}", root, s.size);
  s.run(fmt::format("broadcast of {} bytes from rank {}", tensor.nbytes(), root), [&] {
    return ncclBroadcast(tensor.raw_data(), tensor.raw_data(), tensor.nbytes(), ncclUint8, root, s.comm, s.stream);
  });
}

void NcclCommunicator::send(const Tensor& tensor, int peer) const {
  State& s = *state_;
  s.check_peer_to_peer(tensor, peer, "send", "send to");
  s.run(fmt::format("send of {} bytes to rank {}", tensor.nbytes(), peer), [&] {
    return ncclSend(tensor.raw_data(), tensor.nbytes(), ncclUint8, peer, s.comm, s.stream);
  });
}

void NcclCommunicator::recv(const Tensor& tensor, int peer) const {
  State& s = *state_;
  s.check_peer_to_peer(tensor, peer, "recv", "receive from");
  s.run(fmt::format("receive of {} bytes from rank {}", tensor.nbytes(), peer), [&] {
    return ncclRecv(tensor.raw_data(), tensor.nbytes(), ncclUint8, peer, s.comm, s.stream);
  });
}

void NcclCommunicator::sendrecv(const Tensor& outgoing, int to, const Tensor& incoming, int from) const {
  State& s = *state_;
  s.check_peer_to_peer(outgoing, to, "sendrecv", "send to");
  s.check_peer_to_peer(incoming, from, "sendrecv", "receive from");
  const std::string what = fmt::format("exchange of {} bytes to rank {} and {} bytes from rank {}", outgoing.nbytes(),
                                       to, incoming.nbytes(), from);
  s.run(what, [&] {
    return grouped_exchange(outgoing.raw_data(), outgoing.nbytes(), to, incoming.raw_data(), incoming.nbytes(), from,
                            s.comm, s.stream);
  });
}

namespace {

// Queues a send or receive and the event that marks its end on NCCL's stream.
template <class Operation>
std::shared_ptr<NcclMessage::State> queue_message(const std::shared_ptr<NcclCommunicator::State>& comm,
                                                  std::string what, Operation operation) {
  NcclCommunicator::State& s = *comm;
  auto message = std::make_shared<NcclMessage::State>();
  message->comm = comm;
  {
    const cuda_backend::DeviceGuard guard(s.device);
    DDL_CUDA_CHECK(s.device, cudaEventCreateWithFlags(&message->inputs_ready, cudaEventDisableTiming));
    DDL_CUDA_CHECK(s.device, cudaEventCreateWithFlags(&message->done, cudaEventDisableTiming));
  }
  s.queue(what, operation, message->inputs_ready);
  // A nonblocking communicator takes the call in the background: the
  // event must follow NCCL's work on the stream, so wait for it to be taken.
  s.wait(what, false);
  message->what = std::move(what);
  const cuda_backend::DeviceGuard guard(s.device);
  DDL_CUDA_CHECK(s.device, cudaEventRecord(message->done, s.stream));
  return message;
}

}  // namespace

NcclMessage NcclCommunicator::send_async(const Tensor& tensor, int peer) const {
  State& s = *state_;
  s.check_peer_to_peer(tensor, peer, "send_async", "send to");
  return NcclMessage(queue_message(state_, fmt::format("send of {} bytes to rank {}", tensor.nbytes(), peer), [&] {
    return ncclSend(tensor.raw_data(), tensor.nbytes(), ncclUint8, peer, s.comm, s.stream);
  }));
}

NcclMessage NcclCommunicator::recv_async(const Tensor& tensor, int peer) const {
  State& s = *state_;
  s.check_peer_to_peer(tensor, peer, "recv_async", "receive from");
  return NcclMessage(
      queue_message(state_, fmt::format("receive of {} bytes from rank {}", tensor.nbytes(), peer), [&] {
        return ncclRecv(tensor.raw_data(), tensor.nbytes(), ncclUint8, peer, s.comm, s.stream);
      }));
}

namespace detail {

NcclTransport::NcclTransport(const NcclCommunicator& comm, std::string what, std::int64_t scratch_elements,
                             cuda_backend::ComputeMark* written)
    : state_(comm.state()), what_(std::move(what)), written_(written) {
  NcclCommunicator::State& s = *state_;
  DDL_CHECK(s.comm != nullptr, "{}: rank {}'s NCCL communicator was aborted after an earlier error", what_, s.rank);
  if (s.reserve_scratch(scratch_elements) && written_ != nullptr) {
    // The new block's last user may still be queued on the compute stream:
    // NCCL waits for all of it (below), which covers the marked writers;
    // the mark is used up all the same, as each wait needs its own record.
    written_->order_before(s.stream);
    written_ = nullptr;
  }
  s.follow(written_);
}

NcclTransport::~NcclTransport() {
  if (finished_) return;
  NcclCommunicator::State& s = *state_;
  if (s.comm != nullptr) ncclCommAbort(std::exchange(s.comm, nullptr));
  std::optional<cuda_backend::DeviceGuard> guard;
  try {
    guard.emplace(s.device);
  } catch (const std::exception&) {  // a destructor must not throw: wait on whatever device is current
  }
  cudaStreamSynchronize(s.stream);  // an error here changes nothing: the communicator is gone
}

int NcclTransport::rank() const { return state_->rank; }
int NcclTransport::size() const { return state_->size; }

void NcclTransport::exchange(const float* send, std::int64_t n_send, int to, float* receive, std::int64_t n_recv,
                             int from, int /*tag: NCCL matches by order*/) {
  NcclCommunicator::State& s = *state_;
  s.submit(what_, [&] {
    return grouped_exchange(send, static_cast<std::size_t>(n_send) * sizeof(float), to, receive,
                            static_cast<std::size_t>(n_recv) * sizeof(float), from, s.comm, s.stream);
  });
  // A nonblocking communicator may still be placing the group on the
  // stream: what the algorithm queues next must come after it.
  s.wait(what_, false);
}

void NcclTransport::exchange_add(const float* send, std::int64_t n_send, int to, float* target, std::int64_t n_recv,
                                 int from, int tag) {
  const Tensor& scratch = state_->scratch;
  const std::int64_t capacity = scratch.defined() ? scratch.numel() : 0;
  DDL_CHECK(n_recv <= capacity, "{}: an exchange adds {} values, more than the {} the scratch buffer was made for",
            what_, n_recv, capacity);
  float* arrived = capacity > 0 ? static_cast<float*>(scratch.raw_data()) : nullptr;
  exchange(send, n_send, to, arrived, n_recv, from, tag);
  if (n_recv == 0) return;
  // On NCCL's stream, so it runs after the receive and before the next
  // message reuses the scratch buffer.
  cuda_backend::launch(cuda_backend::Stream{state_->device, state_->stream}, n_recv,
                       kernels::Zip2<fn::Add>{target, arrived, target, {}});
}

void NcclTransport::allreduce(float* data, std::int64_t n, ReduceOp op) {
  NcclCommunicator::State& s = *state_;
  s.submit(what_, [&] { return queue_allreduce(data, n, op, s.comm, s.stream); });
}

void NcclTransport::reduce_scatter(float* data, std::int64_t n, ReduceOp op) {
  NcclCommunicator::State& s = *state_;
  s.submit(what_, [&] {
    return grouped_chunks(n, s.size, [&](const ChunkRange& chunk, int root) {
      return ncclReduce(data + chunk.begin, data + chunk.begin, static_cast<std::size_t>(chunk.size()), ncclFloat,
                        nccl_op(op), root, s.comm, s.stream);
    });
  });
}

void NcclTransport::allgather(float* data, std::int64_t n) {
  NcclCommunicator::State& s = *state_;
  s.submit(what_, [&] {
    return grouped_chunks(n, s.size, [&](const ChunkRange& chunk, int root) {
      return ncclBroadcast(data + chunk.begin, data + chunk.begin, static_cast<std::size_t>(chunk.size()), ncclFloat,
                           root, s.comm, s.stream);
    });
  });
}

void NcclTransport::complete(float* data, std::int64_t n, ReduceOp op) {
  if (op != ReduceOp::average || size() == 1 || n == 0) return;
  cuda_backend::launch(cuda_backend::Stream{state_->device, state_->stream}, n,
                       kernels::Map1<fn::MulScalar>{data, data, {average_factor(size())}});
}

void NcclTransport::finish() {
  state_->finish(what_, written_);
  finished_ = true;
}

}  // namespace detail

}  // namespace ddl::parallel
