// Ring allreduce (Patarasuk & Yuan 2009; the algorithm of Baidu's allreduce,
// Horovod and NCCL's runRing): the p ranks form a ring, rank r sending to
// r+1 and receiving from r-1. The buffer is cut into p chunks.
//
//   reduce-scatter, p-1 steps: at step s rank r sends chunk r-s-1 and
//     receives chunk r-s-2, adding it to its own copy; after the last step
//     rank r holds chunk r summed over all ranks.
//   allgather, p-1 steps: at step s rank r sends chunk r-s (complete) and
//     receives chunk r-s-1, which it keeps; after the last step every rank
//     holds every complete chunk.
//
// Each rank sends 2(p-1) chunks of n/p elements: 2n(p-1)/p in all, which is
// optimal in bandwidth and independent of p, at the price of 2(p-1)
// latencies. Within a step each chunk streams in segments (segments.hpp):
// the reduction of one segment can overlap the transfer of the next where
// the transport moves data on its own (RDMA, a progress thread), and each
// segment is added while it is still in cache. The allgather's chunks land
// in place, and a chunk of one segment is a single sendrecv. On the GPU
// (NcclTransport) each step is one grouped NCCL send and receive followed
// by the sum's kernel on the same stream.
#include <ddl/parallel/collectives/collectives.hpp>

#include <algorithm>

#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {
namespace {

constexpr int kReduceScatterTag = 101;
constexpr int kAllgatherTag = 102;

int wrap(int index, int p) { return ((index % p) + p) % p; }

}  // namespace

ChunkRange chunk_range(std::int64_t n, int parts, int index) {
  const std::int64_t base = n / parts, extra = n % parts;
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

namespace detail {

template <class Transport>
void ring_reduce_scatter(Transport& transport, float* data, std::int64_t n) {
  const int p = transport.size(), r = transport.rank();
  const int right = wrap(r + 1, p), left = wrap(r - 1, p);
  for (int step = 0; step < p - 1; ++step) {
    const ChunkRange send = chunk_range(n, p, wrap(r - step - 1, p));
    const ChunkRange receive = chunk_range(n, p, wrap(r - step - 2, p));
    transport.exchange_add(data + send.begin, send.size(), right, data + receive.begin, receive.size(), left,
                           kReduceScatterTag);
  }
}

template <class Transport>
void ring_allgather(Transport& transport, float* data, std::int64_t n) {
  const int p = transport.size(), r = transport.rank();
  const int right = wrap(r + 1, p), left = wrap(r - 1, p);
  for (int step = 0; step < p - 1; ++step) {
    const ChunkRange send = chunk_range(n, p, wrap(r - step, p));
    const ChunkRange receive = chunk_range(n, p, wrap(r - step - 1, p));
    transport.exchange(data + send.begin, send.size(), right, data + receive.begin, receive.size(), left,
                       kAllgatherTag);
  }
}

template <class Transport>
void ring_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op) {
  ring_reduce_scatter(transport, data, n);
  // Between the halves this rank's chunk is the complete sum, here only.
  const ChunkRange mine = chunk_range(n, transport.size(), transport.rank());
  transport.complete(data + mine.begin, mine.size(), op);
  ring_allgather(transport, data, n);
}

DDL_FOR_BOTH_TRANSPORTS(ring_reduce_scatter, float*, std::int64_t)
DDL_FOR_BOTH_TRANSPORTS(ring_allgather, float*, std::int64_t)
DDL_FOR_BOTH_TRANSPORTS(ring_allreduce, float*, std::int64_t, ReduceOp)

}  // namespace detail

void ring_reduce_scatter(const Communicator& comm, std::span<float> data, WireFormat wire, ReduceOp op) {
  detail::HostTransport transport(comm, wire);
  const auto n = static_cast<std::int64_t>(data.size());
  detail::ring_reduce_scatter(transport, data.data(), n);
  const ChunkRange mine = chunk_range(n, comm.size(), comm.rank());
  transport.complete(data.data() + mine.begin, mine.size(), op);
}

void ring_allgather(const Communicator& comm, std::span<float> data, WireFormat wire) {
  detail::HostTransport transport(comm, wire);
  detail::ring_allgather(transport, data.data(), static_cast<std::int64_t>(data.size()));
}

void ring_allreduce(const Communicator& comm, std::span<float> data, WireFormat wire) {
  detail::HostTransport transport(comm, wire);
  detail::ring_allreduce(transport, data.data(), static_cast<std::int64_t>(data.size()), ReduceOp::sum);
}

}  // namespace ddl::parallel
