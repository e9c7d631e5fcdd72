// Internal to the collectives: messages cut into segments of at most
// config::ring_segment_bytes() / 4 elements, so a large chunk streams (the
// receiver reduces one segment while the next is in flight) and no single
// MPI message exceeds its int count; optionally as float16 on the wire.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/collectives/half.hpp>
#include <ddl/parallel/communicator.hpp>
#include <ddl/parallel/config.hpp>

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
// buffering). With WireFormat::float16 the values travel as halves: encoded
// before sending, decoded before consume() sees them.
template <class Consume>
void exchange_segments(const Communicator& comm, const float* send, std::int64_t n_send, int to, std::int64_t n_recv,
                       int from, int tag, Consume&& consume, WireFormat wire = WireFormat::float32) {
  const std::int64_t segment = segment_elements();
  const bool half = wire == WireFormat::float16;
  const std::size_t element = half ? sizeof(std::uint16_t) : sizeof(float);
  // The outgoing values as sent (halves), alive until the sends complete.
  std::vector<std::uint16_t> encoded(half ? static_cast<std::size_t>(n_send) : 0);
  if (half) encode_half(send, encoded.data(), n_send);
  const auto* outgoing = half ? reinterpret_cast<const std::byte*>(encoded.data())
                              : reinterpret_cast<const std::byte*>(send);
  std::vector<Request> sends;
  for (std::int64_t first = 0; first < n_send; first += segment) {
    const auto count = static_cast<std::size_t>(std::min(segment, n_send - first));
    sends.push_back(comm.isend({outgoing + static_cast<std::size_t>(first) * element, count * element}, to, tag));
  }
  const auto capacity = static_cast<std::size_t>(std::min(segment, n_recv));
  std::vector<std::byte> buffers[2] = {std::vector<std::byte>(capacity * element),
                                       std::vector<std::byte>(capacity * element)};
  std::vector<float> decoded(half ? capacity : 0);
  const auto receive = [&](int buffer, std::int64_t count) {
    return comm.irecv({buffers[buffer].data(), static_cast<std::size_t>(count) * element}, from, tag);
  };
  Request pending;
  if (n_recv > 0) pending = receive(0, std::min(segment, n_recv));
  for (std::int64_t first = 0, k = 0; first < n_recv; first += segment, ++k) {
    const std::int64_t count = std::min(segment, n_recv - first);
    pending.wait();
    const std::int64_t next = first + segment;
    if (next < n_recv) pending = receive(static_cast<int>((k + 1) % 2), std::min(segment, n_recv - next));
    const std::byte* arrived = buffers[k % 2].data();
    if (half) {
      decode_half(reinterpret_cast<const std::uint16_t*>(arrived), decoded.data(), count);
      consume(first, static_cast<const float*>(decoded.data()), count);
    } else {
      consume(first, reinterpret_cast<const float*>(arrived), count);
    }
  }
  for (Request& request : sends) request.wait();
}

}  // namespace ddl::parallel::detail
