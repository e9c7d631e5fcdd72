// NcclCommunicator in a build without NCCL: create() says why there is none.
// No NcclCommunicator can exist, so the other members are never reached;
// they are defined, with the same error, so code that holds an optional
// NcclCommunicator links in every build.
#include <ddl/parallel/communication/nccl_communicator.hpp>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {
namespace {

[[noreturn]] void unavailable(int rank) {
  throw Error(fmt::format("NcclCommunicator: rank {}: ddl was built without NCCL (configured with DDL_NCCL=OFF, or "
                          "CUDA or nccl.h was not found)",
                          rank));
}

}  // namespace

bool NcclCommunicator::built() { return false; }
NcclCommunicator NcclCommunicator::create(const Communicator& mpi, std::optional<int>) { unavailable(mpi.rank()); }
int NcclCommunicator::rank() const { unavailable(-1); }
int NcclCommunicator::size() const { unavailable(-1); }
int NcclCommunicator::device() const { unavailable(-1); }
void NcclCommunicator::allreduce(const Tensor&, ReduceOp) const { unavailable(-1); }
void NcclCommunicator::broadcast(const Tensor&, int) const { unavailable(-1); }
void NcclCommunicator::send(const Tensor&, int) const { unavailable(-1); }
void NcclCommunicator::recv(const Tensor&, int) const { unavailable(-1); }
void NcclCommunicator::sendrecv(const Tensor&, int, const Tensor&, int) const { unavailable(-1); }
NcclMessage NcclCommunicator::send_async(const Tensor&, int) const { unavailable(-1); }
NcclMessage NcclCommunicator::recv_async(const Tensor&, int) const { unavailable(-1); }

// No message can exist either: moving or dropping an empty one does nothing.
struct NcclMessage::State {};
NcclMessage::NcclMessage(NcclMessage&&) noexcept = default;
NcclMessage& NcclMessage::operator=(NcclMessage&&) noexcept = default;
NcclMessage::~NcclMessage() = default;
void NcclMessage::wait() {}

// Nor a transport over one: the device-resident collectives are compiled
// for it in every build. These stubs define every member of NcclTransport
// and use none of its fields, which clang would report as unused.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wunused-private-field"
#endif
namespace detail {
NcclTransport::NcclTransport(const NcclCommunicator&, std::string, std::int64_t, cuda_backend::ComputeMark*) {
  unavailable(-1);
}
NcclTransport::~NcclTransport() = default;
int NcclTransport::rank() const { unavailable(-1); }
int NcclTransport::size() const { unavailable(-1); }
void NcclTransport::exchange_add(const float*, std::int64_t, int, float*, std::int64_t, int, int) { unavailable(-1); }
void NcclTransport::exchange(const float*, std::int64_t, int, float*, std::int64_t, int, int) { unavailable(-1); }
void NcclTransport::complete(float*, std::int64_t, ReduceOp) { unavailable(-1); }
void NcclTransport::allreduce(float*, std::int64_t, ReduceOp) { unavailable(-1); }
void NcclTransport::reduce_scatter(float*, std::int64_t, ReduceOp) { unavailable(-1); }
void NcclTransport::allgather(float*, std::int64_t) { unavailable(-1); }
void NcclTransport::finish() { unavailable(-1); }
}  // namespace detail

}  // namespace ddl::parallel
