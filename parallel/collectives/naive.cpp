// Naive allreduce, the parameter-server pattern: every rank sends its whole
// buffer to rank 0, which adds them up in rank order and sends the sum back
// to each. Two messages per worker, but rank 0 receives and sends n(p-1)
// elements each way, so its link is the bottleneck and the time grows
// linearly with p: the baseline the other algorithms are measured against.
// The root answers the workers one after another.
#include <ddl/parallel/collectives/collectives.hpp>

#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {
namespace {

constexpr int kGatherTag = 401;
constexpr int kScatterTag = 402;

}  // namespace

namespace detail {

template <class Transport>
void naive_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op) {
  const int p = transport.size(), r = transport.rank();
  if (p == 1) return;
  if (r != 0) {
    transport.exchange(data, n, 0, nullptr, 0, 0, kGatherTag);
    transport.exchange(nullptr, 0, 0, data, n, 0, kScatterTag);
    return;
  }
  for (int worker = 1; worker < p; ++worker) {
    transport.exchange_add(nullptr, 0, worker, data, n, worker, kGatherTag);
  }
  transport.complete(data, n, op);
  for (int worker = 1; worker < p; ++worker) transport.exchange(data, n, worker, nullptr, 0, worker, kScatterTag);
}

DDL_FOR_BOTH_TRANSPORTS(naive_allreduce, float*, std::int64_t, ReduceOp)

}  // namespace detail

void naive_allreduce(const Communicator& comm, std::span<float> data) {
  detail::HostTransport transport(comm, WireFormat::float32);
  detail::naive_allreduce(transport, data.data(), static_cast<std::int64_t>(data.size()), ReduceOp::sum);
}

}  // namespace ddl::parallel
