// Internal to the collectives: float32 <-> IEEE float16 for gradients sent
// compressed (Horovod's fp16 compression), rounding to nearest even. Values
// beyond float16's range (65504) become infinities. Compiled in half.cpp,
// with the library's flags, so every caller (and the test) converts alike.
#pragma once

#include <cstdint>

namespace ddl::parallel::detail {

void encode_half(const float* values, std::uint16_t* bits, std::int64_t n);
void decode_half(const std::uint16_t* bits, float* values, std::int64_t n);

}  // namespace ddl::parallel::detail
