// The timeline: a recorder of what each thread of this process was doing
// and when, for a Chrome trace-event / Perfetto file that shows a training
// run step by step. The training loop, the data loader, the communication
// thread and the pipeline open Spans around their phases; the
// recording is off until start(), and while off a Span costs one relaxed
// atomic load and no allocation, so the spans stay in the code for good.
//
//   timeline::start();                       // or ddl-train --timeline
//   { timeline::Span span("compute", "forward"); ... }
//   timeline::Recording recording = timeline::stop();
//   timeline::write_chrome_trace("trace.json", {{.recording = recording}});
//
// Several ranks' recordings become one file through
// parallel::write_timeline (parallel/communication/timeline_gather.hpp), which aligns the
// ranks' clocks first.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ddl::timeline {

// A span's or an instant's annotation, shown in the trace viewer's details
// pane ("bytes": 4194304, "algorithm": "ring").
struct Arg {
  std::string key;
  std::variant<std::int64_t, double, std::string> value;
};

// What happened: a span from begin_ns to end_ns, or an instant (the moment
// a gradient bucket became ready) where instant is true and end_ns ==
// begin_ns. Times are this process's steady clock in nanoseconds.
struct Event {
  std::string name;
  std::string category;  // "data", "compute", "communication", "optimizer", "checkpoint", "evaluation"
  int thread = 0;        // index into Recording::threads
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  bool instant = false;
  std::vector<Arg> args;
};

// One process's timeline: its threads' names and its events in the order
// they ended.
struct Recording {
  std::vector<std::string> threads;
  std::vector<Event> events;
};

struct Options {
  // A span per layer in each forward pass (Sequential) and per autograd
  // node in each backward: the detail of a profiler, at a cost per layer.
  bool per_layer = false;
};

namespace detail {
extern std::atomic<bool> recording;
extern std::atomic<bool> per_layer;
}  // namespace detail

// Whether spans are being recorded now: the one check a disabled Span makes.
inline bool recording() { return detail::recording.load(std::memory_order_relaxed); }
inline bool per_layer() { return recording() && detail::per_layer.load(std::memory_order_relaxed); }

// Starts recording afresh (what an earlier recording held is dropped) and
// names the calling thread "training" unless it has a name.
void start(const Options& options = {});
// Stops recording and hands over what was recorded. Spans still open end
// unrecorded.
Recording stop();

// Names the calling thread's row in the trace ("communication",
// "prefetch"). Threads given the same name share a row (one role, one row,
// however often its thread is replaced), so give threads that run at the
// same time distinct names. Threads that record without a name are
// "thread N".
void name_this_thread(std::string name);

// The clock every event is on: std::chrono::steady_clock, in nanoseconds.
std::int64_t now_ns();

// A span of the calling thread, from construction to destruction (RAII, so
// spans on one thread nest). Recorded only if recording was on when it
// began and still is when it ends.
class Span {
 public:
  Span(std::string_view category, std::string_view name) {
    if (recording()) begin(category, name);
  }
  ~Span() {
    if (event_) end();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  bool active() const { return event_.has_value(); }
  // Adds an annotation (a no-op when not recording).
  Span& arg(std::string_view key, std::int64_t value) {
    if (event_) event_->args.push_back({std::string(key), value});
    return *this;
  }
  Span& arg(std::string_view key, std::string_view value) {
    if (event_) event_->args.push_back({std::string(key), std::string(value)});
    return *this;
  }
  // Adds "GB/s": `bytes` over the time since the span began, for a span
  // that covers a whole transfer (a bucket's allreduce), so a slow link
  // stands out in the viewer.
  Span& rate(std::int64_t bytes);

 private:
  void begin(std::string_view category, std::string_view name);
  void end();

  std::uint64_t generation_ = 0;  // of the recording it began in
  std::optional<Event> event_;    // made only while recording: an idle span costs no construction
};

// Records an instant on the calling thread (a no-op when not recording).
void instant(std::string_view category, std::string_view name, std::vector<Arg> args = {});

// One row group of a trace file: a process's recording, labelled, with
// the offset that puts its clock on the file's common one (its steady clock
// minus clock_offset_ns is the common clock).
struct ProcessTrace {
  int process = 0;    // the trace's pid: the rank
  std::string label;  // "rank 0 (node-a)"
  Recording recording;
  std::int64_t clock_offset_ns = 0;
};

// The traces as one Chrome trace-event JSON document (the "JSON Object
// Format": complete events "X", instants "i", thread and process names as
// metadata "M"), times in microseconds from the earliest event. `about`
// goes into its "otherData" (how the clocks were aligned, say).
std::string chrome_trace_json(const std::vector<ProcessTrace>& processes, const std::vector<Arg>& about = {});
// Writes it to `path`: a temporary file beside it, renamed over it once
// complete, so `path` never holds half a trace. Throws ddl::Error naming
// the file.
void write_chrome_trace(const std::string& path, const std::vector<ProcessTrace>& processes,
                        const std::vector<Arg>& about = {});

// A recording as compact JSON and back: how ranks send theirs to the one
// that writes the file.
std::string to_json(const Recording& recording);
Recording from_json(std::string_view json);

}  // namespace ddl::timeline
