// Binomial-tree allreduce: a reduce to rank 0 followed by a broadcast from
// it, each in log2 p rounds (the classic MPICH algorithms for short
// messages). In reduce round k (mask = 2^k) a rank whose bit k is set sends
// its partial sum to rank - mask and drops out; the others add what
// rank + mask sends them. The broadcast walks the same tree from the root
// down. Every message carries the whole buffer, so each rank moves up to
// 2 n log2 p bytes: few latencies, poor bandwidth; good for small buffers.
#include <ddl/parallel/collectives/collectives.hpp>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {
namespace {

constexpr int kReduceTag = 301;
constexpr int kBroadcastTag = 302;

}  // namespace

namespace detail {

template <class Transport>
void tree_broadcast(Transport& transport, float* data, std::int64_t n, int root) {
  const int p = transport.size();
  // Ranks relative to the root, so the tree is rooted at 0.
  const int relative = (transport.rank() - root + p) % p;
  int mask = 1;
  while (mask < p) {
    if (relative & mask) {
      const int parent = (relative - mask + root) % p;
      transport.exchange(nullptr, 0, parent, data, n, parent, kBroadcastTag);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask >= p) continue;
    const int child = (relative + mask + root) % p;
    transport.exchange(data, n, child, nullptr, 0, child, kBroadcastTag);
  }
}

template <class Transport>
void tree_reduce(Transport& transport, float* data, std::int64_t n) {
  const int p = transport.size(), r = transport.rank();
  for (int mask = 1; mask < p; mask <<= 1) {
    if (r & mask) {
      transport.exchange(data, n, r - mask, nullptr, 0, r - mask, kReduceTag);
      return;
    }
    if (r + mask < p) transport.exchange_add(nullptr, 0, r + mask, data, n, r + mask, kReduceTag);
  }
}

template <class Transport>
void tree_allreduce(Transport& transport, float* data, std::int64_t n, ReduceOp op) {
  if (transport.size() == 1) return;
  tree_reduce(transport, data, n);
  if (transport.rank() == 0) transport.complete(data, n, op);
  tree_broadcast(transport, data, n, 0);
}

DDL_FOR_BOTH_TRANSPORTS(tree_broadcast, float*, std::int64_t, int)
DDL_FOR_BOTH_TRANSPORTS(tree_reduce, float*, std::int64_t)
DDL_FOR_BOTH_TRANSPORTS(tree_allreduce, float*, std::int64_t, ReduceOp)

}  // namespace detail

void tree_broadcast(const Communicator& comm, std::span<float> data, int root) {
  DDL_CHECK(root >= 0 && root < comm.size(), "tree_broadcast: root {} is not a rank of this communicator of {}", root,
            comm.size());
  detail::HostTransport transport(comm, WireFormat::float32);
  detail::tree_broadcast(transport, data.data(), static_cast<std::int64_t>(data.size()), root);
}

void tree_allreduce(const Communicator& comm, std::span<float> data) {
  detail::HostTransport transport(comm, WireFormat::float32);
  detail::tree_allreduce(transport, data.data(), static_cast<std::int64_t>(data.size()), ReduceOp::sum);
}

}  // namespace ddl::parallel
