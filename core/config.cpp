// core's tunables (see config.hpp), read once from the environment.
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>

#include <sched.h>

#include <Eigen/Core>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ddl::config {
namespace {

// The choice named by environment variable `name`: the first of `choices`
// when it is unset or empty, else the one of that name; any other value is an
// error listing the names.
template <class Choice>
Choice read_choice(const char* name, std::initializer_list<std::pair<const char*, Choice>> choices) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return choices.begin()->second;
  std::string names;
  for (const auto& [choice_name, choice] : choices) {
    if (std::string_view(value) == choice_name) return choice;
    names += names.empty() ? choice_name : std::string(", ") + choice_name;
  }
  detail::fail("environment variable {}={} is not one of {}", name, value, names);
}

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

double positive_double_from_environment(const char* name, double fallback, double max) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const double parsed = std::strtod(value, &end);
  DDL_CHECK(*end == '\0' && std::isfinite(parsed) && parsed > 0.0 && parsed <= max,
            "environment variable {}={} is not a positive number up to {:g}", name, value, max);
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
  static CpuConvolution algorithm =
      read_choice<CpuConvolution>("DDL_CPU_CONV", {{"auto", CpuConvolution::Auto},
                                                   {"direct", CpuConvolution::Direct},
                                                   {"winograd", CpuConvolution::Winograd},
                                                   {"ddl-winograd", CpuConvolution::DdlWinograd}});
  return algorithm;
}
}  // namespace

CpuConvolution cpu_convolution() { return convolution_setting(); }

void set_cpu_convolution(CpuConvolution algorithm) { convolution_setting() = algorithm; }

namespace {
CudaConvolution& cuda_convolution_setting() {
  static CudaConvolution algorithms = read_choice<CudaConvolution>(
      "DDL_CUDA_CONV", {{"deterministic", CudaConvolution::Deterministic},
                        {"fastest", CudaConvolution::Fastest},
                        {"benchmark", CudaConvolution::Benchmark}});
  return algorithms;
}
}  // namespace

CudaConvolution cuda_convolution() { return cuda_convolution_setting(); }

void set_cuda_convolution(CudaConvolution algorithms) { cuda_convolution_setting() = algorithms; }

namespace {
bool& op_fusion_setting() {
  static bool on = read_choice<bool>("DDL_OP_FUSION", {{"on", true}, {"off", false}});
  return on;
}
}  // namespace

bool op_fusion() { return op_fusion_setting(); }

void set_op_fusion(bool on) { op_fusion_setting() = on; }

namespace {
// The CPU's AVX-512 extensions (none off x86).
struct Avx512 {
  bool foundation, bf16;
};
Avx512 avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return {__builtin_cpu_supports("avx512f") != 0, __builtin_cpu_supports("avx512bf16") != 0};
#else
  return {false, false};
#endif
}

void check_bf16_support(const std::string& how) {
  DDL_CHECK(cpu_has_bf16(),
            "{}: bf16 on the CPU needs the AVX512-BF16 instructions (AMD Zen 4, Intel Cooper Lake or Sapphire Rapids "
            "and later), which this CPU lacks (AVX-512: {}); use float32",
            how, avx512().foundation ? "yes, without BF16" : "no");
}

CpuPrecision& precision_setting() {
  static CpuPrecision precision = [] {
    const auto chosen = read_choice<CpuPrecision>(
        "DDL_CPU_PRECISION", {{"float32", CpuPrecision::Float32}, {"bf16", CpuPrecision::BFloat16}});
    if (chosen == CpuPrecision::BFloat16) check_bf16_support("environment variable DDL_CPU_PRECISION=bf16");
    return chosen;
  }();
  return precision;
}
}  // namespace

bool cpu_has_bf16() { return avx512().bf16; }

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
  (void)cuda_convolution();
  (void)cpu_precision();
  (void)op_fusion();
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
