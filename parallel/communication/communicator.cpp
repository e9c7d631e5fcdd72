// Communicator and Request over MPI (see communicator.hpp). Every wait goes
// through wait_bounded(), which polls the request and, past the stall
// timeout, names the stuck operation and peer and aborts the job.
#include <ddl/parallel/communication/communicator.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <ddl/core/check.hpp>
#include <ddl/parallel/communication/mpi_internal.hpp>
#include <ddl/parallel/config.hpp>

namespace ddl::parallel {
namespace detail {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  int rank = -1, initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw Error(fmt::format("{} failed on rank {}: {} ({}:{})", call, rank, std::string(text, length), file, line));
}

CommunicatorState::~CommunicatorState() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (shared_window) {
    MPI_Win_unlock_all(shared_window->window);
    MPI_Win_free(&shared_window->window);
  }
  if (owned) MPI_Comm_free(&comm);
}

namespace {

// How long a rank that is ending the job (abort_job) waits for MPI_Abort
// before it leaves on its own.
constexpr std::chrono::milliseconds kAbortGrace{5500};

// Ends the process with `code` after `delay`, whatever the calling thread
// is blocked in by then.
void exit_after(std::chrono::milliseconds delay, int code) {
  try {
    std::thread([delay, code] {
      std::this_thread::sleep_for(delay);
      std::_Exit(code);
    }).detach();
  } catch (const std::system_error&) {
  }
}

}  // namespace

[[noreturn]] void abort_job(const CommunicatorState& comm, const std::string& message, int code) {
  // MPI_Abort asks the launcher to end the job and waits for its answer; a
  // rank whose node has lost the launcher (its link down) waited in it
  // forever, and its output may block as well (nobody reads it). Its own
  // end is what this rank owes the job: it leaves on its own soon, whatever
  // blocks below. (Without a thread, MPI_Abort alone.)
  exit_after(kAbortGrace, code);
  std::fprintf(stderr, "ddl: rank %d: %s\n", comm.world_ranks[static_cast<std::size_t>(comm.rank)], message.c_str());
  std::fflush(stderr);
  // MPI_Abort makes the launcher kill every process at once, and it may
  // stop forwarding output before it has read this message: give it time.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  MPI_Abort(comm.comm, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

// A wait busy-polls for kBusy, then yields between polls until kYielding,
// then sleeps between polls a hundredth of the time it has waited, from
// kBackoff up to kLongestBackoff: a rank waiting long (a node's ranks
// while their leader crosses a slow link) wakes less and less often, so it
// leaves the cores to the ranks that work, for at most 1% more wait.
constexpr std::chrono::microseconds kBusy{20};
constexpr std::chrono::milliseconds kYielding{5};
constexpr std::chrono::microseconds kBackoff{10};
constexpr std::chrono::microseconds kLongestBackoff{1000};

std::string Operation::describe() const {
  std::string text = name;
  if (count >= 0) text += fmt::format(" of {} {}", count, unit);
  if (tag >= 0) text += fmt::format(" (tag {})", tag);
  return text;
}

namespace {

// Tests the requests: MPI_Test for one (its error is the request's own),
// MPI_Testall for several, with a failed request's own error taken out of
// its status.
int test_all(std::span<MPI_Request> requests, int* done, MPI_Status* statuses) {
  if (requests.size() == 1) {
    return MPI_Test(&requests[0], done, statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : statuses);
  }
  int code = MPI_Testall(static_cast<int>(requests.size()), requests.data(), done, statuses);
  int error_class = MPI_SUCCESS;
  MPI_Error_class(code, &error_class);
  if (error_class == MPI_ERR_IN_STATUS && statuses != MPI_STATUSES_IGNORE) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const int own = statuses[i].MPI_ERROR;
      if (own != MPI_SUCCESS && own != MPI_ERR_PENDING) code = own;
    }
  }
  return code;
}

// After one request failed: cancels the others and waits for them (bounded),
// so that MPI no longer reads or writes the caller's buffers once the error
// is thrown.
void settle(std::span<MPI_Request> requests, double timeout) {
  for (MPI_Request& request : requests) {
    if (request != MPI_REQUEST_NULL) MPI_Cancel(&request);
  }
  const auto start = std::chrono::steady_clock::now();
  for (MPI_Request& request : requests) {
    int done = request == MPI_REQUEST_NULL;
    while (!done && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < timeout) {
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      std::this_thread::yield();
    }
    if (!done && request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
}

// What a stall message says of the rank or ranks it names.
constexpr std::string_view kMissing = "missing, stuck or took a different path";

// A tag no other exchange uses (theirs are below 0x4000; MPI allows at
// least 32767).
constexpr int kLivenessTag = 32001;

// The ranks of `comm` that stay silent: a rank stalled in a collective sends
// every other a byte and waits up to `window` seconds for each of theirs.
// The ranks stalled beside it in the same collective reach their own
// timeout at about the same time and send theirs; a rank cut off (its link
// down), stopped, or waiting elsewhere does not. Returns nullopt if MPI
// itself fails.
std::optional<std::vector<int>> silent_ranks(const CommunicatorState& comm, double window) {
  // MPI may touch the bytes and requests until the job ends, which comes
  // next: they are never freed, and nothing pending is cancelled.
  struct Probe {
    std::vector<unsigned char> sent, received;
    std::vector<MPI_Request> sends, receives;
  };
  const auto others = static_cast<std::size_t>(comm.size - 1);
  auto* probe =
      new Probe{std::vector<unsigned char>(others, 1), std::vector<unsigned char>(others, 0),
                std::vector<MPI_Request>(others, MPI_REQUEST_NULL), std::vector<MPI_Request>(others, MPI_REQUEST_NULL)};
  std::vector<int> peers;
  for (int r = 0; r < comm.size; ++r) {
    if (r != comm.rank) peers.push_back(r);
  }
  for (std::size_t i = 0; i < others; ++i) {
    if (MPI_Irecv(&probe->received[i], 1, MPI_BYTE, peers[i], kLivenessTag, comm.comm, &probe->receives[i]) !=
            MPI_SUCCESS ||
        MPI_Isend(&probe->sent[i], 1, MPI_BYTE, peers[i], kLivenessTag, comm.comm, &probe->sends[i]) != MPI_SUCCESS) {
      return std::nullopt;
    }
  }
  std::vector<bool> answered(others, false);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < window) {
    bool all = true;
    for (std::size_t i = 0; i < others; ++i) {
      int done = 1;
      if (!answered[i] && MPI_Test(&probe->receives[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return std::nullopt;
      answered[i] = answered[i] || done != 0;
      all = all && answered[i];
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> silent;
  for (std::size_t i = 0; i < others; ++i) {
    if (!answered[i]) silent.push_back(peers[i]);
  }
  return silent;
}

// "rank(s) 2, 3 on node1 and rank(s) 5 on node2": job-wide ranks grouped
// by host, as ddl-elastic reads them ("rank(s) 2, 3" while the hosts are
// not known yet).
std::string describe_ranks(const CommunicatorState& comm, const std::vector<int>& ranks) {
  const auto host = [&](std::size_t j) {
    const auto r = static_cast<std::size_t>(ranks[j]);
    return r < comm.hosts.size() ? fmt::format(" on {}", comm.hosts[r]) : std::string();
  };
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < ranks.size();) {
    std::vector<int> same;
    std::size_t j = i;
    for (; j < ranks.size() && host(j) == host(i); ++j)
      same.push_back(comm.world_ranks[static_cast<std::size_t>(ranks[j])]);
    parts.push_back(fmt::format("rank(s) {}{}", fmt::join(same, ", "), host(i)));
    i = j;
  }
  return fmt::format("{}", fmt::join(parts, " and "));
}

// Who a collective that stalled waits for, found by a liveness probe. One
// probe per communicator: a second thread stalled on it would find the
// others' bytes taken and name every rank, so it waits for the first to
// end the job.
std::string stalled_on(const CommunicatorState& comm, double timeout, int code) {
  if (comm.probed.exchange(true)) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const double window = std::clamp(timeout / 4, 0.5, 5.0);
  // MPI may block in the probe itself (a connection to a node behind a
  // dead link): the rank still leaves, as abort_job would make it.
  exit_after(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(window)) + kAbortGrace,
             code);
  const auto silent = silent_ranks(comm, window);
  if (!silent) return fmt::format("one of them is {}", kMissing);
  if (silent->empty()) return fmt::format("every rank answered a probe within {:g} s, so none is missing", window);
  return fmt::format("{} did not answer a probe within {:g} s: {} {}", describe_ranks(comm, *silent), window,
                     silent->size() == 1 ? "it is" : "they are", kMissing);
}

}  // namespace

void wait_bounded(std::span<MPI_Request> requests, const CommunicatorState& comm, const Operation& what, int peer,
                  MPI_Status* statuses) {
  const double timeout = config::stall_timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  // A collective does not say which rank it waits for, but among two ranks
  // there is only one other: naming it (and its host) is what lets
  // ddl-elastic leave a lost node out.
  const int named = peer >= 0 ? peer : (comm.size == 2 ? 1 - comm.rank : -1);
  const auto whom = [&] {
    if (named < 0) return std::string("the other ranks");
    // The hosts are not known yet while the communicator is being made.
    const auto r = static_cast<std::size_t>(named);
    return r < comm.hosts.size() ? fmt::format("rank {} on {}", comm.world_ranks[r], comm.hosts[r])
                                 : fmt::format("rank {}", comm.world_ranks[r]);
  };
  bool busy = true;
  for (std::int64_t polls = 0;; ++polls) {
    int done = 0;
    const int code = test_all(requests, &done, statuses);
    if (code != MPI_SUCCESS) {
      settle(requests, timeout);
      char text[MPI_MAX_ERROR_STRING];
      int length = 0;
      MPI_Error_string(code, text, &length);
      throw Error(fmt::format("rank {}: {} with {} failed: {}", comm.world_ranks[static_cast<std::size_t>(comm.rank)],
                              what.describe(), whom(), std::string(text, length)));
    }
    if (done) return;
    // Busy-poll first, reading the clock only every 16 polls: a message from
    // a rank of this node arrives in a microsecond or two, and a yield (or a
    // clock read) per poll showed in a small allreduce's time.
    if (busy && polls % 16 != 15) continue;
    const auto waited = std::chrono::steady_clock::now() - start;
    busy = waited < kBusy;
    if (busy) continue;
    const double seconds = std::chrono::duration<double>(waited).count();
    if (seconds > timeout) {
      abort_job(
          comm,
          fmt::format("stalled: {} with {} has not completed after {:.0f} s; {} (DDL_STALL_TIMEOUT={:g} s); "
                      "aborting every rank",
                      what.describe(), whom(), seconds,
                      named >= 0 ? fmt::format("{} is {}", whom(), kMissing) : stalled_on(comm, timeout, 1), timeout),
          1);
    }
    // Then yield between polls, and later back off, so a communication
    // thread waiting on a slow peer does not take the core from the backward
    // pass it is meant to overlap.
    if (waited < kYielding) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(
          std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(waited / 100), kBackoff, kLongestBackoff));
    }
  }
}

void wait_bounded(MPI_Request& request, const CommunicatorState& comm, const Operation& what, int peer,
                  MPI_Status* status) {
  wait_bounded(std::span<MPI_Request>(&request, 1), comm, what, peer,
               status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

std::string describe_nodes(const CommunicatorState& comm) {
  const auto host = [&](int r) { return comm.hosts[static_cast<std::size_t>(r)]; };
  // Runs of consecutive ranks on one host (a launcher fills nodes in order,
  // but a rank file may not: a host may then appear more than once).
  std::string out;
  for (int first = 0; first < comm.size;) {
    int last = first;
    while (last + 1 < comm.size && host(last + 1) == host(first)) ++last;
    out += fmt::format("{}{} on {}", out.empty() ? "" : ", ",
                       first == last ? fmt::format("rank {}", first) : fmt::format("ranks {}-{}", first, last),
                       host(first));
    first = last + 1;
  }
  return out;
}

struct RequestState {
  MPI_Request request = MPI_REQUEST_NULL;
  std::shared_ptr<CommunicatorState> comm;
  Operation what{"receive"};
  int peer = -1;
  std::int64_t expected_bytes = -1;  // for receives: the count to check
};

}  // namespace detail

namespace {

using detail::abort_job;
using detail::CommunicatorState;
using detail::RequestState;
using detail::wait_bounded;

// The status the process is exiting with (glibc's on_exit hands it over),
// for the finalize watchdog below.
std::atomic<int> exit_status{0};

void remember_exit_status(int status, void* /*unused*/) { exit_status = status; }

// Finalizes MPI at exit if ddl initialised it. MPI_Finalize can hang in a
// transport's last flush: UCX's TCP transport stops progressing endpoints too
// early (openucx/ucx#8738; here about one 3-rank parameter-server run in six
// with UCX_TLS=tcp,self, training complete, one rank flushing while the others
// wait in the launcher's barrier). Main has returned by then, so nothing is
// left to lose: past the stall timeout a watchdog ends the process with the
// status it was exiting with, instead of leaving the job hanging. (The
// launcher then ends the other ranks, and may report that as a failure.)
struct MpiLifetime {
  bool initialized_here = false;
  ~MpiLifetime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!initialized_here || finalized) return;
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const double timeout = config::stall_timeout_seconds();
    std::thread([rank, timeout] {
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout));
      std::fprintf(stderr,
                   "ddl: rank %d: MPI_Finalize has not returned within DDL_STALL_TIMEOUT=%g s (a known hang of "
                   "UCX's TCP transport, openucx/ucx#8738); exiting without it\n",
                   rank, timeout);
      std::fflush(stderr);
      std::_Exit(exit_status.load());
    }).detach();
    MPI_Finalize();
  }
};

void ensure_mpi() {
  static MpiLifetime lifetime = [] {
    MpiLifetime result;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      DDL_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
      result.initialized_here = true;
      DDL_CHECK(provided == MPI_THREAD_MULTIPLE,
                "MPI provides thread level {} but ddl's communication threads need MPI_THREAD_MULTIPLE ({})", provided,
                MPI_THREAD_MULTIPLE);
    }
    // Errors come back as codes that DDL_MPI_CHECK turns into ddl::Error
    // naming the call, instead of MPI killing the job without context.
    DDL_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    return result;
  }();
  // Registered after `lifetime`, so it runs before its destructor at exit.
  static const bool status_recorded = on_exit(remember_exit_status, nullptr) == 0;
  (void)status_recorded;
}

std::shared_ptr<CommunicatorState> make_state(MPI_Comm comm, bool owned) {
  auto state = std::make_shared<CommunicatorState>();
  state->comm = comm;
  state->owned = owned;
  DDL_MPI_CHECK(MPI_Comm_rank(comm, &state->rank));
  DDL_MPI_CHECK(MPI_Comm_size(comm, &state->size));
  MPI_Comm node = MPI_COMM_NULL;
  DDL_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, state->rank, MPI_INFO_NULL, &node));
  DDL_MPI_CHECK(MPI_Comm_rank(node, &state->local_rank));
  DDL_MPI_CHECK(MPI_Comm_size(node, &state->local_size));
  DDL_MPI_CHECK(MPI_Comm_free(&node));
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  DDL_MPI_CHECK(MPI_Comm_group(comm, &group));
  DDL_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> ranks(static_cast<std::size_t>(state->size));
  std::iota(ranks.begin(), ranks.end(), 0);
  state->world_ranks.resize(ranks.size());
  DDL_MPI_CHECK(MPI_Group_translate_ranks(group, state->size, ranks.data(), world, state->world_ranks.data()));
  DDL_MPI_CHECK(MPI_Group_free(&group));
  DDL_MPI_CHECK(MPI_Group_free(&world));
  constexpr int kHostBytes = 256;
  std::vector<char> mine(kHostBytes, '\0');
  ::gethostname(mine.data(), kHostBytes - 1);
  std::vector<char> all(static_cast<std::size_t>(kHostBytes) * static_cast<std::size_t>(state->size));
  MPI_Request request = MPI_REQUEST_NULL;
  DDL_MPI_CHECK(MPI_Iallgather(mine.data(), kHostBytes, MPI_CHAR, all.data(), kHostBytes, MPI_CHAR, comm, &request));
  wait_bounded(request, *state, {"the hostnames' MPI_Allgather", kHostBytes, "bytes"}, -1);
  for (int r = 0; r < state->size; ++r)
    state->hosts.emplace_back(all.data() + static_cast<std::size_t>(r) * kHostBytes);
  return state;
}

int checked_count(std::size_t bytes, const char* what) {
  DDL_CHECK(bytes <= static_cast<std::size_t>(INT_MAX), "{}: {} bytes exceed MPI's int count; send it in pieces", what,
            bytes);
  return static_cast<int>(bytes);
}

void check_peer(const CommunicatorState& comm, int peer, const char* what) {
  DDL_CHECK(peer >= 0 && peer < comm.size, "{}: peer rank {} is outside this communicator of {} ranks", what, peer,
            comm.size);
}

void check_received(const CommunicatorState& comm, const MPI_Status& status, std::int64_t expected, int peer) {
  int received = 0;
  DDL_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &received));
  DDL_CHECK(received == expected, "rank {} expected {} bytes from rank {} but received {}", comm.rank, expected, peer,
            received);
}

}  // namespace

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (state_) {
      try {
        wait();
      } catch (...) {  // a move must not throw; the error already reached the waiter or is lost with the request
      }
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

Request::~Request() {
  if (!state_) return;
  try {
    wait();
  } catch (...) {  // destructors must not throw: an unwaited request's error is dropped with it
  }
}

void Request::wait() {
  if (!state_) return;
  const auto state = std::move(state_);
  MPI_Status status;
  wait_bounded(state->request, *state->comm, state->what, state->peer, &status);
  if (state->expected_bytes >= 0) check_received(*state->comm, status, state->expected_bytes, state->peer);
}

bool Request::test() {
  if (!state_) return true;
  int done = 0;
  MPI_Status status;
  DDL_MPI_CHECK(MPI_Test(&state_->request, &done, &status));
  if (!done) return false;
  const auto state = std::move(state_);
  if (state->expected_bytes >= 0) check_received(*state->comm, status, state->expected_bytes, state->peer);
  return true;
}

Communicator Communicator::world() {
  ensure_mpi();
  static const auto state = make_state(MPI_COMM_WORLD, false);
  return Communicator(state);
}

bool Communicator::built() { return true; }

bool Communicator::launched_by_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return true;
  for (const char* name : {"PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

int Communicator::rank() const { return state_->rank; }
int Communicator::size() const { return state_->size; }
int Communicator::local_rank() const { return state_->local_rank; }
int Communicator::local_size() const { return state_->local_size; }

std::string Communicator::describe() const {
  return fmt::format("rank {} of {} on {}", state_->rank, state_->size, host(state_->rank));
}

std::string Communicator::describe_nodes() const { return detail::describe_nodes(*state_); }

int Communicator::world_rank(int rank) const {
  check_peer(*state_, rank, "Communicator::world_rank");
  return state_->world_ranks[static_cast<std::size_t>(rank)];
}

const std::string& Communicator::host(int rank) const {
  check_peer(*state_, rank, "Communicator::host");
  return state_->hosts[static_cast<std::size_t>(rank)];
}

void Communicator::barrier() const {
  MPI_Request request = MPI_REQUEST_NULL;
  DDL_MPI_CHECK(MPI_Ibarrier(state_->comm, &request));
  wait_bounded(request, *state_, {"barrier"}, -1);
}

Communicator Communicator::split(int color, int key) const {
  MPI_Comm comm = MPI_COMM_NULL;
  DDL_MPI_CHECK(MPI_Comm_split(state_->comm, color, key, &comm));
  return Communicator(make_state(comm, true));
}

Communicator Communicator::node() const {
  if (!state_->node) {
    MPI_Comm node = MPI_COMM_NULL;
    DDL_MPI_CHECK(MPI_Comm_split_type(state_->comm, MPI_COMM_TYPE_SHARED, state_->rank, MPI_INFO_NULL, &node));
    state_->node = make_state(node, true);
    state_->node->parent_bytes_sent = state_->bytes_sent;
  }
  return Communicator(state_->node);
}

Communicator Communicator::across_nodes() const {
  if (!state_->across_nodes) {
    state_->across_nodes = split(state_->local_rank, state_->rank).state_;
    state_->across_nodes->parent_bytes_sent = state_->bytes_sent;
  }
  return Communicator(state_->across_nodes);
}

Request Communicator::isend(std::span<const std::byte> bytes, int peer, int tag) const {
  check_peer(*state_, peer, "isend");
  auto state = std::make_shared<RequestState>();
  state->comm = state_;
  state->peer = peer;
  state->what = {"send", static_cast<std::int64_t>(bytes.size()), "bytes", tag};
  state_->count_sent(bytes.size());
  DDL_MPI_CHECK(MPI_Isend(bytes.data(), checked_count(bytes.size(), "isend"), MPI_BYTE, peer, tag, state_->comm,
                          &state->request));
  return Request(std::move(state));
}

Request Communicator::irecv(std::span<std::byte> bytes, int peer, int tag) const {
  check_peer(*state_, peer, "irecv");
  auto state = std::make_shared<RequestState>();
  state->comm = state_;
  state->peer = peer;
  state->expected_bytes = static_cast<std::int64_t>(bytes.size());
  state->what = {"receive", static_cast<std::int64_t>(bytes.size()), "bytes", tag};
  DDL_MPI_CHECK(MPI_Irecv(bytes.data(), checked_count(bytes.size(), "irecv"), MPI_BYTE, peer, tag, state_->comm,
                          &state->request));
  return Request(std::move(state));
}

void Communicator::sendrecv(std::span<const std::byte> send, int to, std::span<std::byte> receive, int from,
                            int tag) const {
  check_peer(*state_, to, "sendrecv");
  check_peer(*state_, from, "sendrecv");
  // The receive first, so the peer's message finds it posted; both in one
  // bounded wait, with no heap allocation. (MPICH 4.0's MPI_Isendrecv was
  // slower, through its schedules, and its status miscounted the bytes.)
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  DDL_MPI_CHECK(MPI_Irecv(receive.data(), checked_count(receive.size(), "sendrecv"), MPI_BYTE, from, tag, state_->comm,
                          &requests[0]));
  state_->count_sent(send.size());
  DDL_MPI_CHECK(
      MPI_Isend(send.data(), checked_count(send.size(), "sendrecv"), MPI_BYTE, to, tag, state_->comm, &requests[1]));
  MPI_Status statuses[2];
  wait_bounded(requests, *state_, {"sendrecv", static_cast<std::int64_t>(receive.size()), "bytes received", tag}, from,
               statuses);
  check_received(*state_, statuses[0], static_cast<std::int64_t>(receive.size()), from);
}

std::optional<int> Communicator::probe_any(int tag) const {
  int found = 0;
  MPI_Status status;
  DDL_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, tag, state_->comm, &found, &status));
  if (!found) return std::nullopt;
  return status.MPI_SOURCE;
}

std::int64_t Communicator::bytes_sent() const { return state_->bytes_sent->load(std::memory_order_relaxed); }

void Communicator::send(std::span<const std::byte> bytes, int peer, int tag) const { isend(bytes, peer, tag).wait(); }

void Communicator::recv(std::span<std::byte> bytes, int peer, int tag) const { irecv(bytes, peer, tag).wait(); }

void Communicator::send(const Tensor& tensor, int peer, int tag) const {
  const Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(cpu());
  send(std::span<const std::byte>(static_cast<const std::byte*>(host.raw_data()), host.nbytes()), peer, tag);
}

void Communicator::recv(const Tensor& tensor, int peer, int tag) const {
  if (tensor.device().is_cpu()) {
    recv(std::span<std::byte>(static_cast<std::byte*>(tensor.raw_data()), tensor.nbytes()), peer, tag);
    return;
  }
  const Tensor host = Tensor::empty(tensor.shape(), {tensor.dtype(), cpu(), false});
  recv(std::span<std::byte>(static_cast<std::byte*>(host.raw_data()), host.nbytes()), peer, tag);
  tensor.copy_from(host);
}

TensorMessage Communicator::isend(const Tensor& tensor, int peer, int tag) const {
  TensorMessage message{tensor.device().is_cpu() ? tensor.detach() : tensor.detach().to(cpu()), {}};
  message.request =
      isend(std::span<const std::byte>(static_cast<const std::byte*>(message.host.raw_data()), message.host.nbytes()),
            peer, tag);
  return message;
}

TensorMessage Communicator::irecv(const Shape& shape, DType dtype, int peer, int tag) const {
  TensorMessage message{Tensor::empty(shape, {dtype, cpu(), false}), {}};
  message.request =
      irecv(std::span<std::byte>(static_cast<std::byte*>(message.host.raw_data()), message.host.nbytes()), peer, tag);
  return message;
}

void Communicator::sum_doubles(std::span<double> values) const {
  MPI_Request request = MPI_REQUEST_NULL;
  DDL_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values.data(), checked_count(values.size(), "sum_doubles"), MPI_DOUBLE,
                               MPI_SUM, state_->comm, &request));
  wait_bounded(request, *state_, {"sum", static_cast<std::int64_t>(values.size()), "metric values"}, -1);
}

std::vector<std::byte> Communicator::allgather_bytes(std::span<const std::byte> bytes) const {
  std::vector<std::byte> all(bytes.size() * static_cast<std::size_t>(state_->size));
  MPI_Request request = MPI_REQUEST_NULL;
  const int count = checked_count(bytes.size(), "allgather_bytes");
  DDL_MPI_CHECK(MPI_Iallgather(bytes.data(), count, MPI_BYTE, all.data(), count, MPI_BYTE, state_->comm, &request));
  wait_bounded(request, *state_, {"allgather", static_cast<std::int64_t>(bytes.size())}, -1);
  return all;
}

void Communicator::broadcast_bytes(std::span<std::byte> bytes, int root) const {
  check_peer(*state_, root, "broadcast_bytes");
  MPI_Request request = MPI_REQUEST_NULL;
  DDL_MPI_CHECK(
      MPI_Ibcast(bytes.data(), checked_count(bytes.size(), "broadcast_bytes"), MPI_BYTE, root, state_->comm, &request));
  wait_bounded(request, *state_, {"broadcast", static_cast<std::int64_t>(bytes.size())}, root);
}

void Communicator::abort(const std::string& message, int code) const { abort_job(*state_, message, code); }

}  // namespace ddl::parallel
