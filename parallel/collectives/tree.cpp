// Binomial-tree allreduce: a reduce to rank 0 followed by a broadcast from
// it, each in log2 p rounds (the classic MPICH algorithms for short
// messages). In reduce round k (mask = 2^k) a rank whose bit k is set sends
// its partial sum to rank - mask and drops out; the others add what
// rank + mask sends them. The broadcast walks the same tree from the root
// down. Every message carries the whole buffer, so each rank moves up to
// 2 n log2 p bytes: few latencies, poor bandwidth; good for small buffers.
#include <ddl/parallel/collectives/collectives.hpp>

#include <algorithm>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/local_reduce.hpp>
#include <ddl/parallel/collectives/segments.hpp>

namespace ddl::parallel {
namespace {

constexpr int kReduceTag = 301;
constexpr int kBroadcastTag = 302;

void send_all(const Communicator& comm, const float* data, std::int64_t n, int peer, int tag) {
  for (Request& request : detail::send_segments(comm, data, n, peer, tag)) request.wait();
}

void receive_all(const Communicator& comm, float* data, std::int64_t n, int peer, int tag, bool add) {
  if (!add) {
    detail::exchange_into(comm, nullptr, 0, peer, data, n, peer, tag);
    return;
  }
  detail::exchange_segments(comm, nullptr, 0, peer, n, peer, tag,
                            [&](std::int64_t offset, const float* segment, std::int64_t count) {
                              detail::add_into(data + offset, segment, count);
                            });
}

}  // namespace

void tree_broadcast(const Communicator& comm, std::span<float> data, int root) {
  const int p = comm.size();
  DDL_CHECK(root >= 0 && root < p, "tree_broadcast: root {} is not a rank of this communicator of {}", root, p);
  if (p == 1) return;
  const auto n = static_cast<std::int64_t>(data.size());
  // Ranks relative to the root, so the tree is rooted at 0.
  const int relative = (comm.rank() - root + p) % p;
  int mask = 1;
  while (mask < p) {
    if (relative & mask) {
      receive_all(comm, data.data(), n, (relative - mask + root) % p, kBroadcastTag, false);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask < p) send_all(comm, data.data(), n, (relative + mask + root) % p, kBroadcastTag);
  }
}

void tree_allreduce(const Communicator& comm, std::span<float> data) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const auto n = static_cast<std::int64_t>(data.size());
  for (int mask = 1; mask < p; mask <<= 1) {
    if (r & mask) {
      send_all(comm, data.data(), n, r - mask, kReduceTag);
      break;
    }
    if (r + mask < p) receive_all(comm, data.data(), n, r + mask, kReduceTag, true);
  }
  tree_broadcast(comm, data, 0);
}

}  // namespace ddl::parallel
