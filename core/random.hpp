// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011). Element i of a draw is a pure
// function of (seed, offset + i), so the CPU and the GPU produce the same
// numbers for the same seed, in any order and with any thread count.
#pragma once

#include <cstdint>

#include <ddl/core/macros.hpp>

namespace ddl {

struct Philox4x32 {
  std::uint32_t out[4];

  // Ten rounds of the Philox bijection over (counter, key).
  DDL_HOST_DEVICE Philox4x32(std::uint64_t counter, std::uint64_t key) {
    constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
    std::uint32_t c2 = 0, c3 = 0;
    std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
    for (int round = 0; round < 10; ++round) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0;
      const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c2;
      const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
      const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
  }
};

// A uniform float in (0, 1]: 24 random bits, never 0 so log() is safe.
DDL_HOST_DEVICE inline float uint_to_unit_float(std::uint32_t bits) {
  return (static_cast<float>(bits >> 8) + 1.0f) * (1.0f / 16777216.0f);
}

// The state of a stream of draws: a key and the next unused counter.
// Each draw of n elements consumes counters [offset, offset + n).
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }
  void set_state(std::uint64_t seed, std::uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves n counters and returns the first.
  std::uint64_t advance(std::uint64_t n) {
    const std::uint64_t first = offset_;
    offset_ += n;
    return first;
  }

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

// The process-wide generator used when none is passed.
Generator& default_generator();
void manual_seed(std::uint64_t seed);

}  // namespace ddl
