// What the CPU bench programs share: a warm-up-then-median timer, the
// standard command-line options, and the reference GEMM rate measured in the
// same run that the kernels' GFLOP/s are compared with.
#pragma once

#include <ddl/ddl.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace ddl::bench {

struct Timing {
  double median_ms, best_ms;
};

inline Timing time_it(const std::function<void()>& step, int reps) {
  step();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

struct Options {
  std::vector<int> thread_counts{1, 2};
  int reps = 10;
  std::int64_t batch = 128;
};

inline void add_options(CLI::App& app, Options& options) {
  app.add_option("--threads", options.thread_counts, "thread counts to run")->delimiter(',');
  app.add_option("--reps", options.reps, "timed repetitions per case (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", options.batch, "batch size")->check(CLI::PositiveNumber);
}

// A square 1024 GEMM (Eigen, through ddl::matmul) at the current thread count.
struct GemmRate {
  Timing timing;
  double gflops;
};
inline GemmRate measure_gemm(int reps, Generator& generator) {
  constexpr std::int64_t kSize = 1024;
  const Tensor a = uniform({kSize, kSize}, -1.0f, 1.0f, {}, &generator);
  const Tensor b = uniform({kSize, kSize}, -1.0f, 1.0f, {}, &generator);
  const Timing timing = time_it([&] { matmul(a, b); }, reps);
  return {timing, 2.0 * kSize * kSize * kSize / (timing.median_ms * 1e-3) * 1e-9};
}

}  // namespace ddl::bench
