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
#include <ddl/parallel/communication/communicator.hpp>
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

// Whether both directions of an exchange fit one segment each (every step of
// a small allreduce): then the exchange is one Communicator::sendrecv. An
// empty direction sends no message at all, so it takes the general path.
inline bool one_segment_each_way(std::int64_t n_send, std::int64_t n_recv) {
  const std::int64_t segment = segment_elements();
  return n_send > 0 && n_recv > 0 && n_send <= segment && n_recv <= segment;
}

// A buffer of at least `bytes` that stays with the calling thread from one
// exchange to the next. Allocating the receive buffers afresh on every call
// cost a page fault per 4 KiB each time (they are above glibc's mmap
// threshold), more than the transfer itself up to a few MiB.
inline std::byte* thread_scratch(int which, std::size_t bytes) {
  thread_local std::vector<std::byte> scratch[3];
  auto& buffer = scratch[which];
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
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
  const std::byte* outgoing = reinterpret_cast<const std::byte*>(send);
  if (half) {
    auto* encoded = reinterpret_cast<std::uint16_t*>(thread_scratch(2, static_cast<std::size_t>(n_send) * element));
    encode_half(send, encoded, n_send);
    outgoing = reinterpret_cast<const std::byte*>(encoded);
  }
  const auto capacity = static_cast<std::size_t>(std::min(segment, n_recv));
  std::byte* buffers[2] = {thread_scratch(0, capacity * element), thread_scratch(1, capacity * element)};
  std::vector<float> decoded(half ? capacity : 0);
  const auto deliver = [&](std::int64_t first, const std::byte* arrived, std::int64_t count) {
    if (half) {
      decode_half(reinterpret_cast<const std::uint16_t*>(arrived), decoded.data(), count);
      consume(first, static_cast<const float*>(decoded.data()), count);
    } else {
      consume(first, reinterpret_cast<const float*>(arrived), count);
    }
  };
  if (one_segment_each_way(n_send, n_recv)) {
    comm.sendrecv({outgoing, static_cast<std::size_t>(n_send) * element}, to,
                  {buffers[0], static_cast<std::size_t>(n_recv) * element}, from, tag);
    deliver(0, buffers[0], n_recv);
    return;
  }
  const auto receive = [&](int buffer, std::int64_t count) {
    return comm.irecv({buffers[buffer], static_cast<std::size_t>(count) * element}, from, tag);
  };
  // The first receive is posted before the sends, so that the peer's first
  // segment finds it waiting rather than landing in MPI's unexpected queue.
  Request pending;
  if (n_recv > 0) pending = receive(0, std::min(segment, n_recv));
  std::vector<Request> sends;
  for (std::int64_t first = 0; first < n_send; first += segment) {
    const auto count = static_cast<std::size_t>(std::min(segment, n_send - first));
    sends.push_back(comm.isend({outgoing + static_cast<std::size_t>(first) * element, count * element}, to, tag));
  }
  for (std::int64_t first = 0, k = 0; first < n_recv; first += segment, ++k) {
    pending.wait();
    const std::int64_t next = first + segment;
    if (next < n_recv) pending = receive(static_cast<int>((k + 1) % 2), std::min(segment, n_recv - next));
    deliver(first, buffers[k % 2], std::min(segment, n_recv - first));
  }
  for (Request& request : sends) request.wait();
}

// As exchange_segments, but what arrives is the result itself (an
// allgather's or a broadcast's step): float32 segments land straight in
// receive[0, n_recv), every receive posted at once, with no staging buffer
// and no copy, the receives posted before the sends. Halves are decoded
// into place.
inline void exchange_into(const Communicator& comm, const float* send, std::int64_t n_send, int to, float* receive,
                          std::int64_t n_recv, int from, int tag, WireFormat wire = WireFormat::float32) {
  if (wire == WireFormat::float16) {
    exchange_segments(
        comm, send, n_send, to, n_recv, from, tag,
        [receive](std::int64_t offset, const float* segment, std::int64_t count) {
          std::copy(segment, segment + count, receive + offset);
        },
        wire);
    return;
  }
  if (one_segment_each_way(n_send, n_recv)) {
    comm.sendrecv(bytes_of(send, n_send), to, bytes_of(receive, n_recv), from, tag);
    return;
  }
  const std::int64_t segment = segment_elements();
  std::vector<Request> receives;
  for (std::int64_t first = 0; first < n_recv; first += segment) {
    receives.push_back(comm.irecv(bytes_of(receive + first, std::min(segment, n_recv - first)), from, tag));
  }
  for (Request& request : send_segments(comm, send, n_send, to, tag)) request.wait();
  for (Request& request : receives) request.wait();
}

}  // namespace ddl::parallel::detail
