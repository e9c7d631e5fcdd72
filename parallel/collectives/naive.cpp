// Naive allreduce, the parameter-server pattern: every rank sends its whole
// buffer to rank 0, which adds them up in rank order and sends the sum back
// to each. Two messages per worker, but rank 0 receives and sends n(p-1)
// elements each way, so its link is the bottleneck and the time grows
// linearly with p: the baseline the other algorithms are measured against.
#include <ddl/parallel/collectives/collectives.hpp>

#include <algorithm>
#include <vector>

#include <ddl/parallel/collectives/local_reduce.hpp>
#include <ddl/parallel/collectives/segments.hpp>

namespace ddl::parallel {
namespace {

constexpr int kGatherTag = 401;
constexpr int kScatterTag = 402;

}  // namespace

void naive_allreduce(const Communicator& comm, std::span<float> data) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;
  const auto n = static_cast<std::int64_t>(data.size());
  if (r != 0) {
    for (Request& request : detail::send_segments(comm, data.data(), n, 0, kGatherTag)) request.wait();
    detail::exchange_into(comm, nullptr, 0, 0, data.data(), n, 0, kScatterTag);
    return;
  }
  for (int worker = 1; worker < p; ++worker) {
    detail::exchange_segments(comm, nullptr, 0, worker, n, worker, kGatherTag,
                              [&](std::int64_t offset, const float* segment, std::int64_t count) {
                                detail::add_into(data.data() + offset, segment, count);
                              });
  }
  std::vector<Request> sends;
  for (int worker = 1; worker < p; ++worker) {
    for (Request& request : detail::send_segments(comm, data.data(), n, worker, kScatterTag)) {
      sends.push_back(std::move(request));
    }
  }
  for (Request& request : sends) request.wait();
}

}  // namespace ddl::parallel
