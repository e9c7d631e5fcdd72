// The bench programs' timer: one warm-up run, then the median and the best
// of `reps` timed runs. A header of its own, without the command-line
// parser, for programs that take plain arguments.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace ddl::bench {

struct Timing {
  double median_ms, best_ms;
};

inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

inline Timing time_it(const std::function<void()>& step, int reps) {
  step();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    ms.push_back(milliseconds_since(start));
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

}  // namespace ddl::bench
