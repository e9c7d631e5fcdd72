// What a timeline span costs (core/timeline.hpp): a span with one
// annotation, timed while recording is off (what every run pays) and on.
// Prints nanoseconds per span; bench/timeline_overhead.sh measures the cost
// on whole training runs.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>

#include <fmt/format.h>

#include <ddl/core/timeline.hpp>

namespace {

// Nanoseconds per span, the best of 5 runs of `count` spans, each run with
// recording on (from a fresh start) or off.
double ns_per_span(std::int64_t count, bool recording) {
  double best = 1e300;
  for (int run = 0; run < 5; ++run) {
    if (recording) ddl::timeline::start();
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < count; ++i) {
      ddl::timeline::Span span("communication", "allreduce");
      span.arg("bucket", i);
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, ns / static_cast<double>(count));
    if (recording) ddl::timeline::stop();
  }
  return best;
}

}  // namespace

int main() {
  constexpr std::int64_t kSpans = 1'000'000;
  const double off = ns_per_span(kSpans, false);
  const double on = ns_per_span(kSpans, true);
  std::cout << fmt::format("timeline span with one annotation: {:.2f} ns when off, {:.0f} ns when recording\n", off,
                           on);
  return 0;
}
