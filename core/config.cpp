// core's tunables (see config.hpp), read once from the environment.
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>

#include <Eigen/Core>
#include <cstdlib>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ddl::config {
namespace {

int read_positive_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  DDL_CHECK(*end == '\0' && parsed > 0 && parsed <= 4096, "environment variable {}={} is not a positive integer", name,
            value);
  return static_cast<int>(parsed);
}

int default_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int& thread_setting() {
  static int threads = [] {
    const int n = read_positive_int("DDL_NUM_THREADS", default_threads());
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    Eigen::setNbThreads(n);
    return n;
  }();
  return threads;
}

}  // namespace

double positive_double_from_environment(const char* name, double fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const double parsed = std::strtod(value, &end);
  DDL_CHECK(*end == '\0' && parsed > 0.0, "environment variable {}={} is not a positive number", name, value);
  return parsed;
}

std::int64_t positive_bytes_from_environment(const char* name, std::int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 10);
  DDL_CHECK(*end == '\0' && parsed > 0, "environment variable {}={} is not a positive byte count", name, value);
  return parsed;
}

int cpu_device_count() {
  static const int count = read_positive_int("DDL_CPU_DEVICES", 1);
  return count;
}

int num_threads() { return thread_setting(); }

void set_num_threads(int threads) {
  DDL_CHECK(threads > 0, "set_num_threads: thread count must be positive, got {}", threads);
  thread_setting() = threads;
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  Eigen::setNbThreads(threads);
}

}  // namespace ddl::config
