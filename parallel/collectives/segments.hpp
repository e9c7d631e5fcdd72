// Internal to the collectives: messages cut into segments of at most
// config::ring_segment_bytes(), so a large chunk streams (the receiver
// reduces one segment while the next is in flight) and no single MPI message
// exceeds its int count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <ddl/core/config.hpp>
#include <ddl/parallel/communicator.hpp>

namespace ddl::parallel::detail {

inline std::int64_t segment_elements() {
  return std::max<std::int64_t>(config::ring_segment_bytes() / static_cast<std::int64_t>(sizeof(float)), 1);
}

inline std::span<const std::byte> bytes_of(const float* data, std::int64_t n) {
  return {reinterpret_cast<const std::byte*>(data), static_cast<std::size_t>(n) * sizeof(float)};
}
inline std::span<std::byte> bytes_of(float* data, std::int64_t n) {
  return {reinterpret_cast<std::byte*>(data), static_cast<std::size_t>(n) * sizeof(float)};
}

// Starts sending data[0, n) to `peer` as segments; the requests complete the sends.
inline std::vector<Request> send_segments(const Communicator& comm, const float* data, std::int64_t n, int peer,
                                          int tag) {
  std::vector<Request> sends;
  const std::int64_t segment = segment_elements();
  for (std::int64_t first = 0; first < n; first += segment) {
    sends.push_back(comm.isend(bytes_of(data + first, std::min(segment, n - first)), peer, tag));
  }
  return sends;
}

// Sends send[0, n_send) to `to` while receiving n_recv elements from `from`,
// segment by segment, calling consume(offset, segment_data, count) on each
// received segment as it arrives, while the next one is in flight (double
// buffering).
template <class Consume>
void exchange_segments(const Communicator& comm, const float* send, std::int64_t n_send, int to, std::int64_t n_recv,
                       int from, int tag, Consume&& consume) {
  std::vector<Request> sends = send_segments(comm, send, n_send, to, tag);
  const std::int64_t segment = segment_elements();
  std::vector<float> buffers[2] = {std::vector<float>(static_cast<std::size_t>(std::min(segment, n_recv))),
                                   std::vector<float>(static_cast<std::size_t>(std::min(segment, n_recv)))};
  Request pending;
  if (n_recv > 0) pending = comm.irecv(bytes_of(buffers[0].data(), std::min(segment, n_recv)), from, tag);
  for (std::int64_t first = 0, k = 0; first < n_recv; first += segment, ++k) {
    const std::int64_t count = std::min(segment, n_recv - first);
    pending.wait();
    const std::int64_t next = first + segment;
    if (next < n_recv) {
      pending = comm.irecv(bytes_of(buffers[(k + 1) % 2].data(), std::min(segment, n_recv - next)), from, tag);
    }
    consume(first, buffers[k % 2].data(), count);
  }
  for (Request& request : sends) request.wait();
}

}  // namespace ddl::parallel::detail
