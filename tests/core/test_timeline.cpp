// The timeline recorder (core/timeline.hpp): nothing while off, nested
// spans with their annotations while on, a row per thread role, and the
// Chrome trace-event file with every process on one clock.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include <ddl/core/error.hpp>
#include <ddl/core/timeline.hpp>

#include "support/temp_dir.hpp"
#include "support/test_data.hpp"
#include "support/trace_checks.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

namespace {

const timeline::Event* find_event(const timeline::Recording& recording, const std::string& name) {
  const auto found = std::find_if(recording.events.begin(), recording.events.end(),
                                  [&](const timeline::Event& event) { return event.name == name; });
  return found == recording.events.end() ? nullptr : &*found;
}

// Stops any recording a failed test case left running.
struct StopAtEnd {
  ~StopAtEnd() {
    if (timeline::recording()) timeline::stop();
  }
};

}  // namespace

TEST_CASE("timeline: nothing is recorded while it is off") {
  const StopAtEnd stop_at_end;
  timeline::stop();
  {
    timeline::Span span("compute", "forward");
    CHECK_FALSE(span.active());
    span.arg("bytes", 4);
    timeline::instant("communication", "bucket ready");
  }
  CHECK_FALSE(timeline::recording());
  CHECK_FALSE(timeline::per_layer());
  timeline::start();
  CHECK(timeline::stop().events.empty());
}

TEST_CASE("timeline: spans nest on their thread and keep their annotations") {
  const StopAtEnd stop_at_end;
  timeline::start({.per_layer = true});
  CHECK(timeline::per_layer());
  {
    timeline::Span step("training", "step");
    step.arg("step", std::int64_t{7});
    {
      timeline::Span allreduce("communication", "allreduce");
      allreduce.arg("bytes", std::int64_t{1} << 40).arg("algorithm", "ring");
      timeline::instant("communication", "bucket ready", {{"bucket", std::int64_t{2}}, {"share", 0.25}});
    }
  }
  const timeline::Recording recording = timeline::stop();
  REQUIRE(recording.events.size() == 3);
  const timeline::Event* step = find_event(recording, "step");
  const timeline::Event* allreduce = find_event(recording, "allreduce");
  const timeline::Event* ready = find_event(recording, "bucket ready");
  REQUIRE((step && allreduce && ready));
  CHECK(step->category == "training");
  CHECK(step->begin_ns <= allreduce->begin_ns);
  CHECK(allreduce->begin_ns <= ready->begin_ns);
  CHECK(ready->begin_ns <= allreduce->end_ns);
  CHECK(allreduce->end_ns <= step->end_ns);
  CHECK(ready->instant);
  CHECK(ready->end_ns == ready->begin_ns);
  CHECK_FALSE(step->instant);
  REQUIRE(allreduce->args.size() == 2);
  CHECK(std::get<std::int64_t>(allreduce->args[0].value) == std::int64_t{1} << 40);
  CHECK(std::get<std::string>(allreduce->args[1].value) == "ring");
  CHECK(std::get<double>(ready->args[1].value) == 0.25);
  // The thread that started the recording is the training thread.
  CHECK(step->thread == allreduce->thread);
  CHECK(recording.threads.at(static_cast<std::size_t>(step->thread)) == "training");
}

TEST_CASE("timeline: a span's rate is its bytes over the time since it began") {
  const StopAtEnd stop_at_end;
  timeline::start();
  const auto begin = std::chrono::steady_clock::now();
  {
    timeline::Span transfer("communication", "allreduce");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    transfer.rate(std::int64_t{4'000'000});
  }
  const double elapsed_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count();
  timeline::Span idle("communication", "allreduce");
  idle.rate(std::int64_t{1});  // not recording: nothing
  const timeline::Recording recording = timeline::stop();
  REQUIRE(recording.events.size() == 1);
  REQUIRE(recording.events[0].args.size() == 1);
  CHECK(recording.events[0].args[0].key == "GB/s");
  // 4 MB in at least 2 ms and at most the time the block took.
  const double rate = std::get<double>(recording.events[0].args[0].value);
  CHECK(rate <= 4e6 / 2e6);
  CHECK(rate >= 4e6 / elapsed_ns);
}

TEST_CASE("timeline: each thread role has its row, shared by the threads that play it one after another") {
  const StopAtEnd stop_at_end;
  timeline::start();
  for (int i = 0; i < 2; ++i) {
    std::thread([] {
      timeline::name_this_thread("prefetch");
      const timeline::Span span("data", "make batch");
    }).join();
  }
  std::thread([] { const timeline::Span span("data", "unnamed"); }).join();
  { const timeline::Span span("compute", "forward"); }
  const timeline::Recording recording = timeline::stop();
  REQUIRE(recording.events.size() == 4);
  std::vector<std::string> rows;
  for (const timeline::Event& event : recording.events) rows.push_back(recording.threads.at(event.thread));
  CHECK(rows[0] == "prefetch");
  CHECK(rows[1] == "prefetch");
  CHECK(recording.events[0].thread == recording.events[1].thread);
  CHECK(rows[2].starts_with("thread "));
  CHECK(rows[3] == "training");
}

TEST_CASE("timeline: a span begun before start() or ended after stop() is not recorded") {
  const StopAtEnd stop_at_end;
  timeline::start();
  std::optional<timeline::Span> across;
  across.emplace("compute", "across recordings");
  timeline::stop();
  timeline::start();
  across.reset();  // began in the earlier recording
  { const timeline::Span kept("compute", "kept"); }
  std::optional<timeline::Span> open;
  open.emplace("compute", "still open");
  const timeline::Recording recording = timeline::stop();
  open.reset();
  REQUIRE(recording.events.size() == 1);
  CHECK(recording.events[0].name == "kept");
}

TEST_CASE("timeline: a recording survives its JSON round trip, and malformed JSON is an error") {
  const timeline::Recording recording{{"training", "communication"},
                                      {{"allreduce",
                                        "communication",
                                        1,
                                        -5,
                                        1234567890123,
                                        false,
                                        {{"bytes", std::int64_t{-3}}, {"x", 1.5}, {"algorithm", "tree"}}},
                                       {"bucket ready", "communication", 0, 42, 42, true, {}}}};
  const timeline::Recording back = timeline::from_json(timeline::to_json(recording));
  CHECK(back.threads == recording.threads);
  REQUIRE(back.events.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const timeline::Event& a = recording.events[i];
    const timeline::Event& b = back.events[i];
    CHECK(std::tie(a.name, a.category, a.thread, a.begin_ns, a.end_ns, a.instant) ==
          std::tie(b.name, b.category, b.thread, b.begin_ns, b.end_ns, b.instant));
    // The same annotations, in whatever order.
    const auto as_map = [](const std::vector<timeline::Arg>& args) {
      std::map<std::string, timeline::Arg> map;
      for (const timeline::Arg& arg : args) map.emplace(arg.key, arg);
      return map;
    };
    const auto a_args = as_map(a.args), b_args = as_map(b.args);
    REQUIRE(a_args.size() == b_args.size());
    for (const auto& [key, arg] : a_args) CHECK(b_args.at(key).value == arg.value);
  }
  for (const char* bad : {"", "{", "[]", R"({"threads": ["a"], "events": [["x", "c", 3, 0, 0, false, {}]]})"}) {
    CHECK(throws_error_mentioning([&] { timeline::from_json(bad); }, {"timeline", "malformed"}));
  }
}

TEST_CASE("timeline: the trace file puts every process on the common clock, times from the earliest event") {
  // Rank 1's clock runs 1 ms ahead of rank 0's: its offset takes it off.
  const timeline::Recording rank0{{"training"},
                                  {{"step", "training", 0, 10'000, 30'000, false, {{"step", std::int64_t{0}}}},
                                   {"forward", "compute", 0, 11'000, 12'500, false, {}}}};
  const timeline::Recording rank1{{"training", "communication"},
                                  {{"send", "communication", 1, 1'015'000, 1'016'000, false, {}},
                                   {"bucket ready", "communication", 0, 1'014'000, 1'014'000, true, {}}}};
  const std::string text = timeline::chrome_trace_json({{0, "rank 0", rank0, 0}, {1, "rank 1", rank1, 1'000'000}},
                                                       {{"clock_uncertainty_us", 0.5}});
  const nlohmann::json trace = nlohmann::json::parse(text);
  CHECK(trace.at("otherData").at("clock_uncertainty_us") == 0.5);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") != "M") by_name[event.at("name")] = event;
  }
  CHECK(by_name.at("step").at("ts").get<double>() == 0.0);
  CHECK(by_name.at("step").at("dur").get<double>() == 20.0);
  CHECK(by_name.at("step").at("args").at("step") == 0);
  CHECK(by_name.at("forward").at("ts").get<double>() == 1.0);
  CHECK(by_name.at("forward").at("dur").get<double>() == 1.5);
  CHECK(by_name.at("send").at("ts").get<double>() == 5.0);
  CHECK(by_name.at("send").at("pid") == 1);
  CHECK(by_name.at("send").at("tid") == 1);
  CHECK(by_name.at("bucket ready").at("ph") == "i");
  CHECK(by_name.at("bucket ready").at("ts").get<double>() == 4.0);
  CHECK(ddl::test::trace_problems(trace, 2).empty());
  CHECK(ddl::test::span_names(trace, 0) == std::vector<std::string>{"forward", "step"});
}

TEST_CASE("trace checks: overlapping spans, a missing rank and allreduces apart in time are reported") {
  const auto check = [](const timeline::Recording& a, const timeline::Recording& b, std::int64_t offset) {
    const std::string text = timeline::chrome_trace_json({{0, "rank 0", a, 0}, {1, "rank 1", b, offset}});
    return ddl::test::trace_problems(nlohmann::json::parse(text), 2);
  };
  const auto mentions = [](const std::vector<std::string>& problems, const std::string& part) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& problem) { return problem.find(part) != std::string::npos; });
  };
  const auto allreduce = [](std::int64_t begin, std::int64_t end) {
    return timeline::Event{
        "allreduce", "communication", 0, begin, end, false, {{"step", std::int64_t{3}}, {"bucket", std::int64_t{0}}}};
  };
  const timeline::Recording good{{"training"}, {allreduce(0, 10'000)}};
  CHECK(check(good, good, 0).empty());
  // One rank's allreduce ends before the other's begins.
  const timeline::Recording late{{"training"}, {allreduce(20'000, 30'000)}};
  CHECK(mentions(check(good, late, 0), "step 3 bucket 0: its spans do not overlap"));
  // The same spans, once the second clock's offset is taken off, overlap.
  CHECK(check(good, late, 15'000).empty());
  const timeline::Recording crossing{
      {"training"},
      {{"a", "compute", 0, 0, 10'000, false, {}}, {"b", "compute", 0, 5'000, 15'000, false, {}}, allreduce(0, 10'000)}};
  CHECK(mentions(check(crossing, good, 0), "without nesting in it"));
  const timeline::Recording elsewhere{{"training"}, {{"x", "compute", 0, 0, 1'000, false, {}}}};
  CHECK(mentions(check(good, elsewhere, 0), "is on 1 of 2 ranks"));
  CHECK(mentions(ddl::test::trace_problems(nlohmann::json::parse(timeline::chrome_trace_json({{0, "r", good, 0}})), 2),
                 "rank 1: no process name"));
  CHECK(mentions(ddl::test::trace_problems(nlohmann::json::parse(R"({"traceEvents": [{"ph": "B", "pid": 0}]})"), 1),
                 "not closed"));
  CHECK(!ddl::test::trace_problems(nlohmann::json::parse("[]"), 1).empty());
}

TEST_CASE("timeline: write_chrome_trace writes the whole file or, when it cannot, nothing") {
  const ddl::test::TempDir directory("timeline");
  const std::string path = directory.file("trace.json");
  const timeline::Recording recording{{"training"}, {{"step", "training", 0, 0, 1000, false, {}}}};
  timeline::write_chrome_trace(path, {{.process = 0, .label = "ddl-train", .recording = recording}});
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  CHECK(ddl::test::trace_problems(nlohmann::json::parse(text.str()), 1).empty());
  CHECK(directory.entries() == std::vector<std::string>{"trace.json"});
  const std::string missing = directory.file("no/such/dir/trace.json");
  CHECK(
      throws_error_mentioning([&] { timeline::write_chrome_trace(missing, {{.label = "r", .recording = recording}}); },
                              {"timeline", missing, "cannot create"}));
  CHECK(directory.entries() == std::vector<std::string>{"trace.json"});
}
