// core's tunables (see config.hpp), read once from the environment.
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>

#include <sched.h>

#include <Eigen/Core>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ddl::config {
namespace {

int read_positive_int(const char* name, int fallback, int most) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(value, &end, 10);
  DDL_CHECK(*end == '\0' && errno == 0 && parsed > 0 && parsed <= most,
            "environment variable {}={} is not an integer from 1 to {}", name, value, most);
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
    const int n = read_positive_int("DDL_NUM_THREADS", default_threads(), kMaxThreads);
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
  DDL_CHECK(*end == '\0' && std::isfinite(parsed) && parsed > 0.0, "environment variable {}={} is not a positive number",
            name, value);
  return parsed;
}

std::int64_t positive_bytes_from_environment(const char* name, std::int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(value, &end, 10);
  DDL_CHECK(*end == '\0' && errno == 0 && parsed > 0, "environment variable {}={} is not a positive byte count", name,
            value);
  return parsed;
}

int cpu_device_count() {
  static const int count = read_positive_int("DDL_CPU_DEVICES", 1, 4096);
  return count;
}

int num_threads() { return thread_setting(); }

namespace {
CpuConvolution& convolution_setting() {
  static CpuConvolution algorithm = [] {
    const char* value = std::getenv("DDL_CPU_CONV");
    const std::string name = value == nullptr ? "" : value;
    if (name.empty() || name == "auto") return CpuConvolution::Auto;
    if (name == "winograd") return CpuConvolution::Winograd;
    DDL_CHECK(name == "direct", "environment variable DDL_CPU_CONV={} is not one of auto, direct, winograd", name);
    return CpuConvolution::Direct;
  }();
  return algorithm;
}
}  // namespace

CpuConvolution cpu_convolution() { return convolution_setting(); }

void set_cpu_convolution(CpuConvolution algorithm) { convolution_setting() = algorithm; }

bool cpu_has_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512bf16") != 0;
#else
  return false;
#endif
}

namespace {
#if defined(__x86_64__) || defined(__i386__)
const bool kHasAvx512 = __builtin_cpu_supports("avx512f") != 0;
#else
const bool kHasAvx512 = false;
#endif

void check_bf16_support(const std::string& how) {
  DDL_CHECK(cpu_has_bf16(),
            "{}: bf16 on the CPU needs the AVX512-BF16 instructions (AMD Zen 4, Intel Cooper Lake or Sapphire Rapids "
            "and later), which this CPU lacks (AVX-512: {}); use float32",
            how, kHasAvx512 ? "yes, without BF16" : "no");
}

CpuPrecision& precision_setting() {
  static CpuPrecision precision = [] {
    const char* value = std::getenv("DDL_CPU_PRECISION");
    const std::string name = value == nullptr ? "" : value;
    if (name.empty() || name == "float32") return CpuPrecision::Float32;
    DDL_CHECK(name == "bf16", "environment variable DDL_CPU_PRECISION={} is not one of float32, bf16", name);
    check_bf16_support("environment variable DDL_CPU_PRECISION=bf16");
    return CpuPrecision::BFloat16;
  }();
  return precision;
}
}  // namespace

CpuPrecision cpu_precision() { return precision_setting(); }

void set_cpu_precision(CpuPrecision precision) {
  if (precision == CpuPrecision::BFloat16) check_bf16_support("set_cpu_precision(bf16)");
  precision_setting() = precision;
}

int available_cpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (::sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return CPU_COUNT(&cpus);
  return std::max(1u, std::thread::hardware_concurrency());
}

void check_environment() {
  (void)cpu_device_count();
  (void)num_threads();
  (void)cpu_convolution();
  (void)cpu_precision();
}

void set_num_threads(int threads) {
  DDL_CHECK(threads > 0 && threads <= kMaxThreads, "set_num_threads: the thread count must be from 1 to {}, got {}",
            kMaxThreads, threads);
  thread_setting() = threads;
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  Eigen::setNbThreads(threads);
}

}  // namespace ddl::config
