// One timeline file for the job (parallel/communication/timeline_gather.hpp) under mpiexec
// with 2, 3 and 4 ranks: the clocks line up to within their measured
// uncertainty, and a data-parallel run's trace passes every check of
// support/trace_checks.hpp, its allreduces overlapping across the ranks.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include <ddl/core/timeline.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/communication/timeline_gather.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/test_data.hpp"
#include "support/trace_checks.hpp"

using namespace ddl;
using namespace ddl::parallel;

TEST_CASE("timeline: the clocks of ranks on one host agree to within the measured round trip") {
  const Communicator world = Communicator::world();
  const ClockOffsets clocks = measure_clock_offsets(world);
  if (world.rank() != 0) {
    CHECK(clocks.offset_ns.empty());
    return;
  }
  REQUIRE(clocks.offset_ns.size() == static_cast<std::size_t>(world.size()));
  CHECK(clocks.offset_ns[0] == 0);
  for (int rank = 1; rank < world.size(); ++rank) {
    CAPTURE(rank);
    // One steady clock on one host: the true offset is 0, and the rank read
    // its clock between rank 0's two readings.
    const auto r = static_cast<std::size_t>(rank);
    CHECK(clocks.uncertainty_ns[r] > 0);
    CHECK(std::abs(clocks.offset_ns[r]) <= clocks.uncertainty_ns[r]);
  }
}

TEST_CASE("timeline: a data-parallel run gives one trace whose allreduces overlap across the ranks") {
  const Communicator world = Communicator::world();
  std::optional<test::TempDir> directory;
  const std::string path = test::shared_path(world, directory, "trace.json");
  // Buckets of 1 KiB: several per step, reduced by the communication thread
  // while backward runs.
  auto strategy = std::make_shared<DataParallel>(world, DataParallelOptions{.bucket_bytes = 1024});
  timeline::start();
  test::train(strategy, test::kGlobalBatch, test::sgd_with_momentum(), 1);
  const timeline::Recording recording = timeline::stop();
  write_timeline(world, path, recording);
  REQUIRE(strategy->overlapping());
  if (world.rank() != 0) return;
  std::ifstream file(path);
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json trace = nlohmann::json::parse(text.str());
  const std::vector<std::string> problems = test::trace_problems(trace, world.size());
  CHECK_MESSAGE(problems.empty(), fmt::format("{}", fmt::join(problems, "\n")));
  CHECK(trace.at("otherData").at("ranks") == world.size());
  for (int rank = 0; rank < world.size(); ++rank) {
    const std::vector<std::string> names = test::span_names(trace, rank);
    for (const char* expected : {"step", "forward", "backward", "allreduce", "wait for gradients", "update"}) {
      CAPTURE(rank);
      CAPTURE(expected);
      CHECK(std::find(names.begin(), names.end(), expected) != names.end());
    }
  }
  // The allreduces ran on the communication thread's row.
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("name") != "allreduce") continue;
    const auto row = std::find_if(trace.at("traceEvents").begin(), trace.at("traceEvents").end(), [&](const auto& m) {
      return m.at("ph") == "M" && m.at("name") == "thread_name" && m.at("pid") == event.at("pid") &&
             m.at("tid") == event.at("tid");
    });
    REQUIRE(row != trace.at("traceEvents").end());
    CHECK(row->at("args").at("name") == "communication");
  }
}

TEST_CASE("timeline: when rank 0 cannot write the file, every rank throws with rank 0's reason") {
  const Communicator world = Communicator::world();
  const std::string path = "/nonexistent-ddl-directory/trace.json";
  timeline::start();
  const timeline::Recording recording = timeline::stop();
  if (world.rank() == 0) {
    CHECK(test::throws_error_mentioning([&] { write_timeline(world, path, recording); }, {path, "cannot create"}));
  } else {
    CHECK(test::throws_error_mentioning([&] { write_timeline(world, path, recording); },
                                        {path, "because rank 0 cannot", "cannot create"}));
  }
}
