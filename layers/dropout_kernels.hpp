// The index kernels behind dropout (one body for CPU and GPU; listed in
// layer_kernels.hpp). Internal: not installed.
#pragma once

#include <cstdint>

#include <ddl/core/macros.hpp>
#include <ddl/core/random.hpp>

namespace ddl::kernels {

// Forward: out[i] = keep(i) ? in[i] / (1 - p) : 0, and the keep bits. One
// Philox call gives four 32-bit words, eight 16-bit uniforms: index j
// handles elements 8j .. 8j+7 with counter offset + j and packs their keep
// bits into mask[j]. (16 bits resolve p to 1/65536, ample for a drop rate,
// and halve the Philox work per element.)
struct DropoutForward {
  const float* in;
  float* out;
  std::int32_t* mask;
  std::int64_t n;
  std::uint64_t seed;
  std::uint64_t offset;
  float p;
  static constexpr std::int64_t kPerCall = 8;
  static std::int64_t calls(std::int64_t n) { return (n + kPerCall - 1) / kPerCall; }
  DDL_HOST_DEVICE void operator()(std::int64_t j) const {
    const Philox4x32 bits(offset + static_cast<std::uint64_t>(j), seed);
    const float scale = 1.0f / (1.0f - p);
    std::int32_t keep_bits = 0;
    for (std::int64_t lane = 0; lane < kPerCall; ++lane) {
      const std::uint32_t r16 = (bits.out[lane / 2] >> (16 * (lane % 2))) & 0xFFFFu;
      const bool keep = (static_cast<float>(r16) + 1.0f) * (1.0f / 65536.0f) > p;  // uniform in (0, 1]
      keep_bits |= static_cast<std::int32_t>(keep) << lane;
      const std::int64_t i = j * kPerCall + lane;
      if (i < n) out[i] = keep ? in[i] * scale : 0.0f;
    }
    mask[j] = keep_bits;
  }
};

// Backward: grad_in[i] = keep(i) ? grad[i] / (1 - p) : 0, from the stored bits.
struct DropoutBackward {
  const float* grad;
  float* grad_in;
  const std::int32_t* mask;
  std::int64_t n;
  float p;
  DDL_HOST_DEVICE void operator()(std::int64_t j) const {
    const float scale = 1.0f / (1.0f - p);
    for (std::int64_t lane = 0; lane < DropoutForward::kPerCall; ++lane) {
      const std::int64_t i = j * DropoutForward::kPerCall + lane;
      if (i < n) grad_in[i] = (mask[j] >> lane) & 1 ? grad[i] * scale : 0.0f;
    }
  }
};

}  // namespace ddl::kernels
