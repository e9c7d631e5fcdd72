// Internal to the collectives: float32 <-> IEEE float16 for gradients sent
// compressed (Horovod's fp16 compression), through the compiler's _Float16
// (round to nearest even; hardware conversions where the CPU has them).
// Values beyond float16's range (65504) become infinities.
#pragma once

#include <cstdint>
#include <cstring>

namespace ddl::parallel::detail {

inline void encode_half(const float* values, std::uint16_t* bits, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const auto half = static_cast<_Float16>(values[i]);
    std::memcpy(bits + i, &half, sizeof(half));
  }
}

inline void decode_half(const std::uint16_t* bits, float* values, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    _Float16 half;
    std::memcpy(&half, bits + i, sizeof(half));
    values[i] = static_cast<float>(half);
  }
}

}  // namespace ddl::parallel::detail
