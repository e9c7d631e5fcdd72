// See trace_checks.hpp.
#include "support/trace_checks.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace ddl::test {
namespace {

using nlohmann::json;

// Times are microseconds printed from integer nanoseconds: a thousandth of
// a microsecond absorbs their rounding.
constexpr double kRounding = 1e-3;

struct Span {
  double begin, end;
  std::string name;
};

bool has(const json& event, const char* key, json::value_t type) {
  if (!event.contains(key)) return false;
  const json::value_t actual = event.at(key).type();
  if (type == json::value_t::number_float) {
    return actual == json::value_t::number_float || actual == json::value_t::number_integer ||
           actual == json::value_t::number_unsigned;
  }
  if (type == json::value_t::number_integer) {
    return actual == json::value_t::number_integer || actual == json::value_t::number_unsigned;
  }
  return actual == type;
}

// A problem with one event, or empty.
std::string event_problem(const json& event) {
  if (!event.is_object()) return "is not an object";
  if (!has(event, "ph", json::value_t::string)) return "has no phase \"ph\"";
  const std::string phase = event.at("ph");
  if (phase != "X" && phase != "i" && phase != "M") return fmt::format("has phase '{}' (a span not closed?)", phase);
  if (!has(event, "pid", json::value_t::number_integer)) return "has no integer pid";
  if (!has(event, "name", json::value_t::string)) return "has no name";
  if (phase == "M") return event.contains("args") ? "" : "is metadata without args";
  if (!has(event, "tid", json::value_t::number_integer)) return "has no integer tid";
  if (!has(event, "cat", json::value_t::string)) return "has no category";
  if (!has(event, "ts", json::value_t::number_float) || event.at("ts").get<double>() < 0.0) {
    return "has no time ts >= 0";
  }
  if (phase == "X" && (!has(event, "dur", json::value_t::number_float) || event.at("dur").get<double>() < 0.0)) {
    return "is a span without a duration >= 0";
  }
  return "";
}

// Spans of one thread row must nest like the calls that made them.
void check_nesting(std::vector<Span>& spans, const std::string& row, std::vector<std::string>& problems) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.begin, b.end) < std::tie(b.begin, a.end);  // outer spans before the spans they hold
  });
  std::vector<const Span*> open;
  for (const Span& span : spans) {
    while (!open.empty() && open.back()->end <= span.begin + kRounding) open.pop_back();
    if (!open.empty() && span.end > open.back()->end + kRounding) {
      problems.push_back(fmt::format("{}: span '{}' [{}, {}] overlaps '{}' [{}, {}] without nesting in it", row,
                                     span.name, span.begin, span.end, open.back()->name, open.back()->begin,
                                     open.back()->end));
      return;
    }
    open.push_back(&span);
  }
}

}  // namespace

std::vector<std::string> trace_problems(const json& trace, int ranks) {
  std::vector<std::string> problems;
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace.at("traceEvents").is_array()) {
    return {"not a trace-event document: no \"traceEvents\" array"};
  }
  std::map<std::pair<int, int>, std::vector<Span>> rows;
  std::set<std::pair<int, int>> named_rows;
  std::set<int> named_processes;
  // (step, bucket) -> rank -> [begin, end]
  std::map<std::pair<std::int64_t, std::int64_t>, std::map<int, std::pair<double, double>>> allreduces;
  const json& events = trace.at("traceEvents");
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& event = events[i];
    if (const std::string problem = event_problem(event); !problem.empty()) {
      problems.push_back(fmt::format("event {} {}: {}", i, problem, event.dump().substr(0, 200)));
      continue;
    }
    const int pid = event.at("pid");
    const std::string phase = event.at("ph");
    const std::string name = event.at("name");
    if (phase == "M") {
      if (name == "process_name") named_processes.insert(pid);
      if (name == "thread_name" && event.contains("tid")) named_rows.insert({pid, event.at("tid").get<int>()});
      continue;
    }
    const int tid = event.at("tid");
    if (phase != "X") continue;
    const double begin = event.at("ts");
    const double end = begin + event.at("dur").get<double>();
    rows[{pid, tid}].push_back({begin, end, name});
    if (name == "allreduce") {
      const json args = event.value("args", json::object());
      if (!has(args, "step", json::value_t::number_integer) || !has(args, "bucket", json::value_t::number_integer)) {
        problems.push_back(fmt::format("event {}: an allreduce without integer step and bucket args", i));
        continue;
      }
      auto& per_rank = allreduces[{args.at("step").get<std::int64_t>(), args.at("bucket").get<std::int64_t>()}];
      if (!per_rank.emplace(pid, std::pair{begin, end}).second) {
        problems.push_back(fmt::format("rank {}: two allreduces of step {} bucket {}", pid, args.at("step").dump(),
                                       args.at("bucket").dump()));
      }
    }
  }
  for (auto& [row, spans] : rows) {
    const std::string where = fmt::format("rank {} thread {}", row.first, row.second);
    if (row.first < 0 || row.first >= ranks) problems.push_back(fmt::format("{}: no such rank", where));
    if (!named_rows.contains(row)) problems.push_back(fmt::format("{}: the thread row has no name", where));
    check_nesting(spans, where, problems);
  }
  for (int rank = 0; rank < ranks; ++rank) {
    if (!named_processes.contains(rank)) problems.push_back(fmt::format("rank {}: no process name", rank));
    const bool any = std::any_of(rows.begin(), rows.end(), [&](const auto& row) { return row.first.first == rank; });
    if (!any) problems.push_back(fmt::format("rank {}: no spans", rank));
  }
  const double uncertainty = trace.value("otherData", json::object()).value("clock_uncertainty_us", 0.0);
  for (const auto& [key, per_rank] : allreduces) {
    const auto label = fmt::format("the allreduce of step {} bucket {}", key.first, key.second);
    if (static_cast<int>(per_rank.size()) != ranks) {
      problems.push_back(fmt::format("{} is on {} of {} ranks", label, per_rank.size(), ranks));
      continue;
    }
    double latest_begin = -std::numeric_limits<double>::infinity();
    double earliest_end = std::numeric_limits<double>::infinity();
    for (const auto& [rank, interval] : per_rank) {
      latest_begin = std::max(latest_begin, interval.first);
      earliest_end = std::min(earliest_end, interval.second);
    }
    if (latest_begin > earliest_end + 2.0 * uncertainty + kRounding) {
      problems.push_back(
          fmt::format("{}: its spans do not overlap across the ranks (one ends at {} us, another "
                      "begins at {} us; clock uncertainty {} us)",
                      label, earliest_end, latest_begin, uncertainty));
    }
  }
  return problems;
}

std::vector<std::string> span_names(const json& trace, int rank) {
  std::set<std::string> names;
  for (const json& event : trace.at("traceEvents")) {
    if (event.value("ph", "") == "X" && event.value("pid", -1) == rank) names.insert(event.value("name", ""));
  }
  return {names.begin(), names.end()};
}

}  // namespace ddl::test
