// Memory under shapes that keep changing: a Conv2d (32 -> 32 channels, 3x3,
// batch 1, width 9) run forward and backward on inputs one row taller each
// time, 600 heights, as inference on images of many sizes or tiles of many
// shapes would. Every 100 heights it prints how far the process's resident
// memory has grown and what the CPU pool caches against what tensors hold:
// a cache that kept every size, or a primitive per geometry, grows without
// end (core/caching_pool.hpp, core/cpu/onednn.hpp).
//
//   bench/ddl_bench_shape_churn [channels=32] [heights=600]
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/conv2d.hpp>

namespace {

// VmRSS of /proc/self/status, in KiB.
long resident_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ddl;
  const std::int64_t channels = argc > 1 ? std::atoll(argv[1]) : 32;
  const int heights = argc > 2 ? std::atoi(argv[2]) : 600;
  if (channels < 1 || heights < 1) {
    fmt::print(stderr, "usage: {} [channels >= 1] [heights >= 1]\n", argv[0]);
    return 2;
  }
  set_num_threads(1);
  Generator generator(1);
  layers::Conv2d conv(channels, channels, {.kernel_size = 3, .padding = 1}, &generator);
  const long start = resident_kib();
  fmt::print("{:>10} {:>16} {:>12} {:>12}\n", "heights", "resident +MiB", "cached MiB", "in use MiB");
  for (int i = 1; i <= heights; ++i) {
    const Tensor x = uniform({1, channels, 7 + i, 9}, -1.0f, 1.0f, {}, &generator).set_requires_grad();
    sum(conv.forward(x)).backward();
    if (i % 100 == 0 || i == heights) {
      const MemoryStats stats = memory_stats(cpu());
      fmt::print("{:>10} {:>16.0f} {:>12.0f} {:>12.1f}\n", i, (resident_kib() - start) / 1024.0,
                 static_cast<double>(stats.bytes_cached) / (1 << 20), static_cast<double>(stats.bytes_in_use) / (1 << 20));
    }
  }
}
