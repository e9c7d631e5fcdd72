// Communicator in a build without MPI: no process is one of several ranks,
// and world() says why there is no communicator. No Communicator can exist,
// so the other members are never reached; they are defined, with the same
// error, so that the strategies and every program that asks for ranks
// compile and link in every build (as nccl_unavailable.cpp does for NCCL),
// and a request for several ranks is refused in words instead of by #if.
#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {
namespace {

[[noreturn]] void unavailable(const char* what) {
  throw Error(
      fmt::format("{}: ddl was built without MPI (configured with DDL_MPI=OFF, or MPICH was not found), so "
                  "it runs in one process only",
                  what));
}

}  // namespace

Request& Request::operator=(Request&& other) noexcept {
  state_ = std::move(other.state_);
  return *this;
}
Request::~Request() = default;
void Request::wait() {}
bool Request::test() { return true; }

bool Communicator::built() { return false; }
bool Communicator::launched_by_mpi() { return false; }
Communicator Communicator::world() { unavailable("Communicator::world"); }

int Communicator::rank() const { unavailable("Communicator::rank"); }
int Communicator::size() const { unavailable("Communicator::size"); }
int Communicator::local_rank() const { unavailable("Communicator::local_rank"); }
int Communicator::local_size() const { unavailable("Communicator::local_size"); }
std::string Communicator::describe() const { unavailable("Communicator::describe"); }
std::string Communicator::describe_nodes() const { unavailable("Communicator::describe_nodes"); }
const std::string& Communicator::host(int) const { unavailable("Communicator::host"); }
void Communicator::barrier() const { unavailable("Communicator::barrier"); }
Communicator Communicator::split(int, int) const { unavailable("Communicator::split"); }
Communicator Communicator::node() const { unavailable("Communicator::node"); }
Communicator Communicator::across_nodes() const { unavailable("Communicator::across_nodes"); }
void Communicator::send(std::span<const std::byte>, int, int) const { unavailable("Communicator::send"); }
void Communicator::recv(std::span<std::byte>, int, int) const { unavailable("Communicator::recv"); }
Request Communicator::isend(std::span<const std::byte>, int, int) const { unavailable("Communicator::isend"); }
Request Communicator::irecv(std::span<std::byte>, int, int) const { unavailable("Communicator::irecv"); }
void Communicator::sendrecv(std::span<const std::byte>, int, std::span<std::byte>, int, int) const {
  unavailable("Communicator::sendrecv");
}
std::optional<int> Communicator::probe_any(int) const { unavailable("Communicator::probe_any"); }
void Communicator::send(const Tensor&, int, int) const { unavailable("Communicator::send"); }
void Communicator::recv(const Tensor&, int, int) const { unavailable("Communicator::recv"); }
TensorMessage Communicator::isend(const Tensor&, int, int) const { unavailable("Communicator::isend"); }
TensorMessage Communicator::irecv(const Shape&, DType, int, int) const { unavailable("Communicator::irecv"); }
void Communicator::sum_doubles(std::span<double>) const { unavailable("Communicator::sum_doubles"); }
std::vector<std::byte> Communicator::allgather_bytes(std::span<const std::byte>) const {
  unavailable("Communicator::allgather_bytes");
}
void Communicator::broadcast_bytes(std::span<std::byte>, int) const { unavailable("Communicator::broadcast_bytes"); }
std::int64_t Communicator::bytes_sent() const { unavailable("Communicator::bytes_sent"); }
void Communicator::abort(const std::string&, int) const { unavailable("Communicator::abort"); }

// The collectives that call MPI's own (the rest are written on the
// Communicator's messages and compile as they are).
void builtin_allreduce(const Communicator&, std::span<float>) { unavailable("builtin_allreduce"); }
void shared_memory_allreduce(const Communicator&, std::span<float>) { unavailable("shared_memory_allreduce"); }
void builtin_reduce_scatter(const Communicator&, std::span<float>, ReduceOp) { unavailable("builtin_reduce_scatter"); }
void builtin_allgather(const Communicator&, std::span<float>) { unavailable("builtin_allgather"); }

}  // namespace ddl::parallel
