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
// in place, and a chunk of one segment is a single sendrecv.
#include <ddl/parallel/collectives/collectives.hpp>

#include <algorithm>
#include <vector>

#include <ddl/parallel/collectives/half.hpp>
#include <ddl/parallel/collectives/local_reduce.hpp>
#include <ddl/parallel/collectives/segments.hpp>

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

void ring_reduce_scatter(const Communicator& comm, std::span<float> data, WireFormat wire) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const auto n = static_cast<std::int64_t>(data.size());
  const int right = wrap(r + 1, p), left = wrap(r - 1, p);
  for (int step = 0; step < p - 1; ++step) {
    const ChunkRange send = chunk_range(n, p, wrap(r - step - 1, p));
    const ChunkRange receive = chunk_range(n, p, wrap(r - step - 2, p));
    float* target = data.data() + receive.begin;
    detail::exchange_segments(
        comm, data.data() + send.begin, send.size(), right, receive.size(), left, kReduceScatterTag,
        [&](std::int64_t offset, const float* segment, std::int64_t count) {
          detail::add_into(target + offset, segment, count);
        },
        wire);
  }
}

void ring_allgather(const Communicator& comm, std::span<float> data, WireFormat wire) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const auto n = static_cast<std::int64_t>(data.size());
  const int right = wrap(r + 1, p), left = wrap(r - 1, p);
  for (int step = 0; step < p - 1; ++step) {
    const ChunkRange send = chunk_range(n, p, wrap(r - step, p));
    const ChunkRange receive = chunk_range(n, p, wrap(r - step - 1, p));
    detail::exchange_into(comm, data.data() + send.begin, send.size(), right, data.data() + receive.begin,
                          receive.size(), left, kAllgatherTag, wire);
  }
}

void ring_allreduce(const Communicator& comm, std::span<float> data, WireFormat wire) {
  ring_reduce_scatter(comm, data, wire);
  if (wire == WireFormat::float16 && comm.size() > 1) {
    // The others will hold this chunk as float16 arrived: so must its owner.
    const ChunkRange mine = chunk_range(static_cast<std::int64_t>(data.size()), comm.size(), comm.rank());
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(mine.size()));
    detail::encode_half(data.data() + mine.begin, bits.data(), mine.size());
    detail::decode_half(bits.data(), data.data() + mine.begin, mine.size());
  }
  ring_allgather(comm, data, wire);
}

}  // namespace ddl::parallel
