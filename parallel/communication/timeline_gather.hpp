// One trace file for the whole job: every rank's timeline recording
// (core/timeline.hpp) goes to rank 0, which puts them on one clock and writes
// a Chrome trace-event / Perfetto file with a process row per rank.
//
// Aligning the clocks: each rank's events are on its own steady clock, and
// steady clocks of different hosts count from different boots. Rank 0
// measures each rank's offset as Cristian's algorithm does: it notes its
// time t0, asks the rank for its time t, and notes t1 when the answer
// arrives; the rank read its clock somewhere in [t0, t1], so t - (t0 + t1)/2
// is the offset to within (t1 - t0)/2. Of several rounds the one with the
// shortest round trip is kept. On one host the clocks are the same clock
// and the measured offsets are zero to within that bound (a few
// microseconds); across hosts the bound says how far apart two ranks' spans
// may be drawn wrongly. Clock drift during the run is not corrected: it is
// parts per million, microseconds per minute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ddl/core/timeline.hpp>
#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

// Each rank's clock offset from rank 0's and its uncertainty, as measured
// by rank 0 (on other ranks both are empty). Collective.
struct ClockOffsets {
  std::vector<std::int64_t> offset_ns;       // rank r's clock minus rank 0's
  std::vector<std::int64_t> uncertainty_ns;  // half the best round trip
};
inline constexpr int kClockRounds = 16;
ClockOffsets measure_clock_offsets(const Communicator& comm, int rounds = kClockRounds);

// Collective: gathers every rank's `recording` on rank 0, aligns the
// clocks, and has rank 0 write the file (timeline::write_chrome_trace). If
// rank 0 cannot write it, every rank throws ddl::Error with rank 0's reason.
void write_timeline(const Communicator& comm, const std::string& path, const timeline::Recording& recording);

}  // namespace ddl::parallel
