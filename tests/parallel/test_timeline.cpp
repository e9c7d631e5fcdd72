// One timeline file for the job (parallel/communication/timeline_gather.hpp) under mpiexec
// with 2, 3 and 4 ranks: the clocks line up to within their measured
// uncertainty, and a data-parallel run's trace passes every check of
// support/trace_checks.hpp, its allreduces overlapping across the ranks.
// And what the recorded times prove: the first gradient bucket is reduced
// while backward still runs, and with overlap off only after it.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include <ddl/core/timeline.hpp>
#include <ddl/parallel/communication/timeline_gather.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/test_data.hpp"
#include "support/trace_checks.hpp"

using namespace ddl;
using namespace ddl::parallel;

namespace {

// Two convolutions on 48x48 images, then a Dense of 1.5 MB: with the default
// buckets (1 MiB first, as PyTorch DDP), the Dense layer's gradients fill
// bucket 0 at the start of backward, and the convolutions' backward (most
// of it) is still ahead when it is handed to the communication thread.
std::vector<float> train_wide_cnn(const std::shared_ptr<DataParallel>& strategy, const Communicator& world) {
  Generator generator(11);
  auto model = std::make_shared<layers::Sequential>();
  model->emplace<layers::Conv2d>(1, 8, layers::Conv2dOptions{.padding = 1}, &generator)
      .emplace<layers::ReLU>()
      .emplace<layers::Conv2d>(8, 16, layers::Conv2dOptions{.padding = 1}, &generator)
      .emplace<layers::ReLU>()
      .emplace<layers::Flatten>()
      .emplace<layers::Dense>(16 * 48 * 48, 10, true, &generator);
  const std::int64_t samples = 8 * world.size() * 3;  // 3 steps of 8 per rank
  Generator data_generator(12);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < samples; ++i) labels.push_back(i % 10);
  const models::Dataset data{uniform({samples, 1, 48, 48}, 0.0f, 1.0f, {}, &data_generator),
                             from_vector(labels, {samples})};
  optim::Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()),
                         test::quiet_options({}, strategy));
  models::DataLoader loader(data, {.batch_size = 8});
  trainer.fit(loader, {.epochs = 1});
  return test::flat_parameters(*model);
}

struct StepTimes {
  std::int64_t backward_end = 0;
  std::int64_t first_ready = -1;      // bucket 0 handed on (instant), -1: never
  std::int64_t first_allreduce = -1;  // the step's first allreduce begins
};

// Per training step, from one rank's recording: when backward ended, when
// bucket 0 was handed on and when the step's first allreduce began.
std::vector<StepTimes> step_times(const timeline::Recording& recording) {
  std::vector<std::pair<std::int64_t, std::int64_t>> steps;  // [begin, end]
  for (const timeline::Event& event : recording.events) {
    if (event.name == "step") steps.emplace_back(event.begin_ns, event.end_ns);
  }
  std::sort(steps.begin(), steps.end());
  std::vector<StepTimes> times(steps.size());
  for (const timeline::Event& event : recording.events) {
    const auto step = std::find_if(steps.begin(), steps.end(), [&](const auto& s) {
      return s.first <= event.begin_ns && event.begin_ns <= s.second;
    });
    if (step == steps.end()) continue;
    StepTimes& t = times[static_cast<std::size_t>(step - steps.begin())];
    if (event.name == "backward") t.backward_end = std::max(t.backward_end, event.end_ns);
    const bool bucket_0 = std::any_of(event.args.begin(), event.args.end(), [](const timeline::Arg& arg) {
      return arg.key == "bucket" && std::get<std::int64_t>(arg.value) == 0;
    });
    if (event.name == "bucket ready" && bucket_0) t.first_ready = event.begin_ns;
    if (event.name == "allreduce" && (t.first_allreduce < 0 || event.begin_ns < t.first_allreduce)) {
      t.first_allreduce = event.begin_ns;
    }
  }
  return times;
}

}  // namespace

TEST_CASE("DataParallel: the first bucket's allreduce begins while backward runs, and with overlap off after it") {
  const Communicator world = Communicator::world();
  std::vector<float> weights[2];
  for (const bool overlap : {true, false}) {
    CAPTURE(overlap);
    auto strategy =
        std::make_shared<DataParallel>(world, DataParallelOptions{.overlap = overlap ? Overlap::on : Overlap::off});
    timeline::start();
    weights[overlap ? 0 : 1] = train_wide_cnn(strategy, world);
    const timeline::Recording recording = timeline::stop();
    REQUIRE(strategy->bucket_count() == 2);
    CHECK(strategy->overlapping() == overlap);
    const std::vector<StepTimes> times = step_times(recording);
    REQUIRE(times.size() == 3);
    int started_in_backward = 0;
    for (const StepTimes& t : times) {
      REQUIRE(t.first_allreduce > 0);
      if (overlap) {
        // Handed on during backward (the training thread's own record), so
        // the reduction may start; it does once the thread is scheduled.
        REQUIRE(t.first_ready > 0);
        CHECK(t.first_ready < t.backward_end);
        if (t.first_allreduce < t.backward_end) ++started_in_backward;
      } else {
        CHECK(t.first_ready < 0);
        CHECK(t.first_allreduce >= t.backward_end);  // --no-overlap waits for backward
      }
    }
    // The convolutions' backward takes milliseconds after the hand-off;
    // waking the communication thread, microseconds. On a machine whose
    // cores all run ranks it may miss a step, not all three.
    if (overlap) CHECK(started_in_backward >= 1);
  }
  CHECK(weights[0] == weights[1]);  // the same sums either way
}

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
  auto strategy =
      std::make_shared<DataParallel>(world, DataParallelOptions{.bucket_bytes = 1024, .overlap = Overlap::on});
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
