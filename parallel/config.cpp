// The parallel module's tunables (see config.hpp), read once. The getters
// run inside waits and at exit, where an exception would end the process
// without a word: a bad value there falls back to the default, and
// check_environment() is where it is reported.
#include <ddl/core/config.hpp>
#include <ddl/core/error.hpp>
#include <ddl/parallel/config.hpp>

namespace ddl::parallel::config {
namespace {

constexpr double kStallTimeout = 60.0;
// A week: far past any real stall, far inside a steady clock's range.
constexpr double kLongestStallTimeout = 7 * 24 * 3600.0;

double stall_timeout_from_environment(const char* name, double fallback) {
  return ddl::config::positive_double_from_environment(name, fallback, kLongestStallTimeout);
}
constexpr std::int64_t kFusionThreshold = std::int64_t{25} << 20;
constexpr std::int64_t kRingSegment = std::int64_t{256} << 10;
constexpr std::int64_t kShmSegment = std::int64_t{1} << 20;

template <class Read, class T>
T or_default(Read read, const char* name, T fallback) {
  try {
    return read(name, fallback);
  } catch (const Error&) {
    return fallback;
  }
}

}  // namespace

double stall_timeout_seconds() {
  static const double seconds =
      or_default(stall_timeout_from_environment, "DDL_STALL_TIMEOUT", kStallTimeout);
  return seconds;
}

std::int64_t fusion_threshold_bytes() {
  static const std::int64_t bytes =
      or_default(ddl::config::positive_bytes_from_environment, "DDL_FUSION_THRESHOLD", kFusionThreshold);
  return bytes;
}

std::int64_t ring_segment_bytes() {
  static const std::int64_t bytes =
      or_default(ddl::config::positive_bytes_from_environment, "DDL_RING_SEGMENT", kRingSegment);
  return bytes;
}

std::int64_t shm_segment_bytes() {
  static const std::int64_t bytes =
      or_default(ddl::config::positive_bytes_from_environment, "DDL_SHM_SEGMENT", kShmSegment);
  return bytes;
}

void check_environment() {
  (void)stall_timeout_from_environment("DDL_STALL_TIMEOUT", kStallTimeout);
  for (const auto& [name, fallback] : {std::pair{"DDL_FUSION_THRESHOLD", kFusionThreshold},
                                       std::pair{"DDL_RING_SEGMENT", kRingSegment},
                                       std::pair{"DDL_SHM_SEGMENT", kShmSegment}}) {
    (void)ddl::config::positive_bytes_from_environment(name, fallback);
  }
}

}  // namespace ddl::parallel::config
