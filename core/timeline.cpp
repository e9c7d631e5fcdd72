// The timeline's recorder and its Chrome trace-event output (see
// timeline.hpp). Events go to one list under a mutex: spans are coarse
// (a phase of a step, a layer at most), a few hundred per step, so one lock
// per span costs far less than the work it measures.
#include <ddl/core/timeline.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ddl/core/atomic_file.hpp>
#include <ddl/core/check.hpp>

namespace ddl::timeline {

namespace detail {
std::atomic<bool> recording{false};
std::atomic<bool> per_layer{false};
}  // namespace detail

namespace {

using nlohmann::json;

// Process-wide: a thread keeps its row from one recording to the next.
struct Recorder {
  std::mutex mutex;
  std::vector<std::string> threads;
  std::vector<Event> events;
  // Bumped by start() and stop(): a span that began in an earlier
  // recording is not recorded in a later one.
  std::atomic<std::uint64_t> generation{0};
};

Recorder& recorder() {
  static Recorder instance;
  return instance;
}

thread_local int this_thread = -1;

// The calling thread's row, registered on first use; under the mutex.
int thread_row(Recorder& r) {
  if (this_thread < 0) {
    this_thread = static_cast<int>(r.threads.size());
    r.threads.push_back(fmt::format("thread {}", this_thread));
  }
  return this_thread;
}

// Puts the calling thread on the row named `name`, made if none is. Threads
// of one role share its row: each epoch's prefetch thread is a new thread,
// but one row in the trace. Under the mutex.
void move_to_row(Recorder& r, std::string name) {
  const auto row = std::find(r.threads.begin(), r.threads.end(), name);
  this_thread = static_cast<int>(row - r.threads.begin());
  if (row == r.threads.end()) r.threads.push_back(std::move(name));
}

void record(Event event, std::uint64_t generation) {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  if (!recording() || r.generation.load() != generation) return;
  event.thread = thread_row(r);
  r.events.push_back(std::move(event));
}

json args_json(const std::vector<Arg>& args) {
  json object = json::object();
  for (const Arg& arg : args) std::visit([&](const auto& value) { object[arg.key] = value; }, arg.value);
  return object;
}

std::vector<Arg> args_from(const json& object) {
  std::vector<Arg> args;
  for (const auto& [key, value] : object.items()) {
    if (value.is_number_integer()) {
      args.push_back({key, value.get<std::int64_t>()});
    } else if (value.is_number()) {
      args.push_back({key, value.get<double>()});
    } else {
      args.push_back({key, value.get<std::string>()});
    }
  }
  return args;
}

}  // namespace

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start(const Options& options) {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  r.events.clear();
  ++r.generation;
  if (this_thread < 0 || r.threads[static_cast<std::size_t>(this_thread)].starts_with("thread ")) {
    move_to_row(r, "training");
  }
  detail::per_layer.store(options.per_layer, std::memory_order_relaxed);
  detail::recording.store(true, std::memory_order_relaxed);
}

Recording stop() {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  detail::recording.store(false, std::memory_order_relaxed);
  ++r.generation;
  return {r.threads, std::exchange(r.events, {})};
}

void name_this_thread(std::string name) {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  move_to_row(r, std::move(name));
}

void Span::begin(std::string_view category, std::string_view name) {
  event_.emplace();
  event_->name = name;
  event_->category = category;
  generation_ = recorder().generation.load();
  event_->begin_ns = now_ns();
}

Span& Span::rate(std::int64_t bytes) {
  if (event_) {
    const auto nanoseconds = std::max<std::int64_t>(now_ns() - event_->begin_ns, 1);
    event_->args.push_back({"GB/s", static_cast<double>(bytes) / static_cast<double>(nanoseconds)});
  }
  return *this;
}

void Span::end() {
  if (!recording()) return;
  event_->end_ns = now_ns();
  record(std::move(*event_), generation_);
}

void instant(std::string_view category, std::string_view name, std::vector<Arg> args) {
  if (!recording()) return;
  const std::int64_t now = now_ns();
  record({std::string(name), std::string(category), 0, now, now, true, std::move(args)}, recorder().generation.load());
}

std::string chrome_trace_json(const std::vector<ProcessTrace>& processes, const std::vector<Arg>& about) {
  // Times count from the earliest event of any process, on the common clock.
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const ProcessTrace& process : processes) {
    for (const Event& event : process.recording.events) {
      origin = std::min(origin, event.begin_ns - process.clock_offset_ns);
    }
  }
  const auto microseconds = [&](std::int64_t ns) { return static_cast<double>(ns) / 1000.0; };
  json events = json::array();
  for (const ProcessTrace& process : processes) {
    events.push_back(
        {{"ph", "M"}, {"pid", process.process}, {"name", "process_name"}, {"args", {{"name", process.label}}}});
    events.push_back({{"ph", "M"},
                      {"pid", process.process},
                      {"name", "process_sort_index"},
                      {"args", {{"sort_index", process.process}}}});
    const Recording& recording = process.recording;
    std::vector<bool> used(recording.threads.size(), false);
    for (const Event& event : recording.events) used.at(static_cast<std::size_t>(event.thread)) = true;
    for (std::size_t t = 0; t < recording.threads.size(); ++t) {
      if (!used[t]) continue;
      events.push_back({{"ph", "M"},
                        {"pid", process.process},
                        {"tid", t},
                        {"name", "thread_name"},
                        {"args", {{"name", recording.threads[t]}}}});
    }
    std::vector<const Event*> ordered;
    for (const Event& event : recording.events) ordered.push_back(&event);
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const Event* a, const Event* b) { return a->begin_ns < b->begin_ns; });
    for (const Event* event : ordered) {
      json entry = {{"name", event->name},
                    {"cat", event->category},
                    {"pid", process.process},
                    {"tid", event->thread},
                    {"ts", microseconds(event->begin_ns - process.clock_offset_ns - origin)}};
      if (event->instant) {
        entry["ph"] = "i";
        entry["s"] = "t";  // drawn on its thread's row
      } else {
        entry["ph"] = "X";
        entry["dur"] = microseconds(event->end_ns - event->begin_ns);
      }
      if (!event->args.empty()) entry["args"] = args_json(event->args);
      events.push_back(std::move(entry));
    }
  }
  json document = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  if (!about.empty()) document["otherData"] = args_json(about);
  return document.dump();
}

void write_chrome_trace(const std::string& path, const std::vector<ProcessTrace>& processes,
                        const std::vector<Arg>& about) {
  const std::string text = chrome_trace_json(processes, about);
  write_file_atomically(path, text, "timeline");
}

std::string to_json(const Recording& recording) {
  json events = json::array();
  for (const Event& event : recording.events) {
    events.push_back(
        {event.name, event.category, event.thread, event.begin_ns, event.end_ns, event.instant, args_json(event.args)});
  }
  return json{{"threads", recording.threads}, {"events", std::move(events)}}.dump();
}

Recording from_json(std::string_view text) {
  Recording recording;
  try {
    const json document = json::parse(text);
    recording.threads = document.at("threads").get<std::vector<std::string>>();
    for (const json& entry : document.at("events")) {
      recording.events.push_back({entry.at(0).get<std::string>(), entry.at(1).get<std::string>(),
                                  entry.at(2).get<int>(), entry.at(3).get<std::int64_t>(),
                                  entry.at(4).get<std::int64_t>(), entry.at(5).get<bool>(), args_from(entry.at(6))});
      const int thread = recording.events.back().thread;
      DDL_CHECK(thread >= 0 && static_cast<std::size_t>(thread) < recording.threads.size(), "event on thread {} of {}",
                thread, recording.threads.size());
    }
  } catch (const json::exception& error) {
    ::ddl::detail::fail("timeline: a recording's JSON is malformed: {}", error.what());
  } catch (const Error& error) {
    ::ddl::detail::fail("timeline: a recording's JSON is malformed: {}", error.what());
  }
  return recording;
}

}  // namespace ddl::timeline
