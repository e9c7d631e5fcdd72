// See timeline_gather.hpp.
#include <ddl/parallel/communication/timeline_gather.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/parallel/communication/agreement.hpp>

namespace ddl::parallel {
namespace {

// The job is between steps when the file is written, so no other message
// with these tags is in flight.
constexpr int kClockTag = 7301;
constexpr int kRecordingTag = 7302;

std::span<const std::byte> bytes_of(const std::int64_t& value) { return std::as_bytes(std::span(&value, 1)); }
std::span<std::byte> bytes_of(std::int64_t& value) { return std::as_writable_bytes(std::span(&value, 1)); }

void send_text(const Communicator& comm, const std::string& text, int peer) {
  const auto size = static_cast<std::int64_t>(text.size());
  comm.send(bytes_of(size), peer, kRecordingTag);
  comm.send(std::as_bytes(std::span(text.data(), text.size())), peer, kRecordingTag);
}

std::string recv_text(const Communicator& comm, int peer) {
  std::int64_t size = 0;
  comm.recv(bytes_of(size), peer, kRecordingTag);
  std::string text(static_cast<std::size_t>(size), '\0');
  comm.recv(std::as_writable_bytes(std::span(text.data(), text.size())), peer, kRecordingTag);
  return text;
}

}  // namespace

ClockOffsets measure_clock_offsets(const Communicator& comm, int rounds) {
  DDL_CHECK(rounds >= 1, "measure_clock_offsets: rounds must be >= 1, got {}", rounds);
  ClockOffsets result;
  if (comm.rank() == 0) {
    result.offset_ns.assign(static_cast<std::size_t>(comm.size()), 0);
    result.uncertainty_ns.assign(static_cast<std::size_t>(comm.size()), 0);
  }
  for (int peer = 1; peer < comm.size(); ++peer) {
    std::int64_t best_round_trip = std::numeric_limits<std::int64_t>::max();
    for (int round = 0; round < rounds; ++round) {
      std::int64_t time = 0;
      if (comm.rank() == 0) {
        const std::int64_t t0 = timeline::now_ns();
        comm.send(bytes_of(time), peer, kClockTag);
        comm.recv(bytes_of(time), peer, kClockTag);
        const std::int64_t t1 = timeline::now_ns();
        if (t1 - t0 < best_round_trip) {
          best_round_trip = t1 - t0;
          result.offset_ns[static_cast<std::size_t>(peer)] = time - (t0 + (t1 - t0) / 2);
          result.uncertainty_ns[static_cast<std::size_t>(peer)] = (t1 - t0 + 1) / 2;
        }
      } else if (comm.rank() == peer) {
        comm.recv(bytes_of(time), 0, kClockTag);
        time = timeline::now_ns();
        comm.send(bytes_of(time), 0, kClockTag);
      }
    }
  }
  return result;
}

void write_timeline(const Communicator& comm, const std::string& path, const timeline::Recording& recording) {
  const ClockOffsets clocks = measure_clock_offsets(comm, kClockRounds);
  std::string failure;
  if (comm.rank() != 0) {
    send_text(comm, comm.describe(), 0);
    send_text(comm, timeline::to_json(recording), 0);
  } else {
    // Everything is received before anything can fail here, so no rank is
    // left waiting in a send.
    std::vector<std::string> labels{comm.describe()}, recordings(1);
    for (int peer = 1; peer < comm.size(); ++peer) {
      labels.push_back(recv_text(comm, peer));
      recordings.push_back(recv_text(comm, peer));
    }
    try {
      std::vector<timeline::ProcessTrace> processes{{0, labels[0], recording, 0}};
      for (int peer = 1; peer < comm.size(); ++peer) {
        const auto r = static_cast<std::size_t>(peer);
        processes.push_back({peer, labels[r], timeline::from_json(recordings[r]), clocks.offset_ns[r]});
      }
      const std::int64_t uncertainty = *std::max_element(clocks.uncertainty_ns.begin(), clocks.uncertainty_ns.end());
      const std::vector<timeline::Arg> about{
          {"clock_alignment", fmt::format("each rank's steady clock, offset to rank 0's by the fastest of {} "
                                          "ping-pongs (Cristian's algorithm)",
                                          kClockRounds)},
          {"clock_uncertainty_us", static_cast<double>(uncertainty) / 1000.0},
          {"ranks", static_cast<std::int64_t>(comm.size())}};
      timeline::write_chrome_trace(path, processes, about);
    } catch (const Error& error) {
      failure = error.what();
    }
  }
  // Whether rank 0 could write it, agreed, so that every rank reports the
  // failure rather than only one.
  agree_all_can_proceed(comm, failure, "write_timeline " + path);
}

}  // namespace ddl::parallel
