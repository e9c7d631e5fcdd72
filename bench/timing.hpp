// What the CPU bench programs share: a warm-up-then-median timer
// (time_it.hpp), the standard command-line options, and the reference GEMM
// rate measured in the same run that the kernels' GFLOP/s are compared with.
#pragma once

#include <ddl/ddl.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <vector>

#include "time_it.hpp"

namespace ddl::bench {

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

// A square 1024 GEMM (through ddl::matmul) at the current thread count.
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
