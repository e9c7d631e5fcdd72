// The parallel module's tunables (see config.hpp), read once.
#include <ddl/core/config.hpp>
#include <ddl/parallel/config.hpp>

namespace ddl::parallel::config {

double stall_timeout_seconds() {
  static const double seconds = ddl::config::positive_double_from_environment("DDL_STALL_TIMEOUT", 60.0);
  return seconds;
}

std::int64_t fusion_threshold_bytes() {
  static const std::int64_t bytes =
      ddl::config::positive_bytes_from_environment("DDL_FUSION_THRESHOLD", std::int64_t{25} << 20);
  return bytes;
}

std::int64_t ring_segment_bytes() {
  static const std::int64_t bytes =
      ddl::config::positive_bytes_from_environment("DDL_RING_SEGMENT", std::int64_t{256} << 10);
  return bytes;
}

std::int64_t shm_segment_bytes() {
  static const std::int64_t bytes =
      ddl::config::positive_bytes_from_environment("DDL_SHM_SEGMENT", std::int64_t{1} << 20);
  return bytes;
}

}  // namespace ddl::parallel::config
