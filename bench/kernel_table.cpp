#include "kernel_table.hpp"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddl::bench {
namespace {

struct Activity {
  std::string name;
  std::uint64_t start_ns, end_ns;
};

// CUPTI hands filled buffers back on a thread of its own.
std::mutex recorded_mutex;
std::vector<Activity> recorded;

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;
constexpr std::size_t kBufferAlignment = 8;  // what CUPTI asks of a buffer

void check(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  throw std::runtime_error(std::string("CUPTI: ") + call + ": " + (text != nullptr ? text : "unknown error"));
}

std::string readable(const char* mangled) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                         &std::free);
  return status == 0 ? std::string(name.get()) : std::string(mangled);
}

const char* copy_direction(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "host to device";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "device to host";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "device to device";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "peer to peer";
    default:
      return "other";
  }
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // 0: CUPTI drops records and counts them
  *max_records = 0;                               // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid_bytes) {
  std::vector<Activity> activities;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        activities.push_back({readable(kernel->name), kernel->start, kernel->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        activities.push_back({std::string("[copy, ") + copy_direction(copy->copyKind) + "]", copy->start, copy->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* set = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        activities.push_back({"[memset]", set->start, set->end});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
  const std::lock_guard lock(recorded_mutex);
  recorded.insert(recorded.end(), std::make_move_iterator(activities.begin()),
                  std::make_move_iterator(activities.end()));
}

// Nanoseconds in which at least one activity ran: two kernels that overlap
// on different streams count once.
std::uint64_t busy_ns(std::vector<Activity> activities) {
  std::ranges::sort(activities, {}, &Activity::start_ns);
  std::uint64_t busy = 0, covered_until = 0;
  for (const Activity& activity : activities) {
    const std::uint64_t from = std::max(activity.start_ns, covered_until);
    if (activity.end_ns > from) busy += activity.end_ns - from;
    covered_until = std::max(covered_until, activity.end_ns);
  }
  return busy;
}

}  // namespace

KernelTable::KernelTable() {
  {
    const std::lock_guard lock(recorded_mutex);
    recorded.clear();
  }
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  for (const CUpti_ActivityKind kind : kKinds) check(cuptiActivityEnable(kind), "cuptiActivityEnable");
}

KernelTable::~KernelTable() {
  for (const CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

void KernelTable::print(std::FILE* out, double wall_ms, int steps, int rows) {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::size_t dropped = 0;
  check(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), "cuptiActivityGetNumDroppedRecords");
  std::vector<Activity> activities;
  {
    const std::lock_guard lock(recorded_mutex);
    activities.swap(recorded);
  }
  struct Total {
    std::uint64_t ns = 0;
    std::int64_t count = 0;
  };
  std::map<std::string, Total> by_name;
  std::uint64_t total_ns = 0;
  for (const Activity& activity : activities) {
    Total& total = by_name[activity.name];
    total.ns += activity.end_ns - activity.start_ns;
    ++total.count;
    total_ns += activity.end_ns - activity.start_ns;
  }
  std::vector<std::pair<std::string, Total>> table(by_name.begin(), by_name.end());
  std::ranges::sort(table, [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });

  const double per_step = 1.0 / steps;
  const double busy_ms = static_cast<double>(busy_ns(activities)) * 1e-6 * per_step;
  const double step_ms = wall_ms * per_step;
  std::fprintf(out, "GPU activity (CUPTI), per step of %.3f ms: busy %.3f ms (%.0f%%), %.1f activities (%zu names)",
               step_ms, busy_ms, 100.0 * busy_ms / step_ms, static_cast<double>(activities.size()) * per_step,
               table.size());
  if (dropped > 0) std::fprintf(out, ", %zu records dropped (the figures undercount)", dropped);
  std::fprintf(out, "\n%10s %8s %7s  %s\n", "ms/step", "n/step", "share", "name");
  for (std::size_t i = 0; i < table.size() && i < static_cast<std::size_t>(rows); ++i) {
    const auto& [name, total] = table[i];
    std::fprintf(out, "%10.4f %8.1f %6.1f%%  %.110s\n", static_cast<double>(total.ns) * 1e-6 * per_step,
                 static_cast<double>(total.count) * per_step,
                 100.0 * static_cast<double>(total.ns) / static_cast<double>(std::max<std::uint64_t>(total_ns, 1)),
                 name.c_str());
  }
}

}  // namespace ddl::bench
