#include <ddl/parallel/collectives/half.hpp>

#include <bit>
#include <type_traits>

// The type that converts: the compiler's _Float16 where it has one and the
// CPU converts in hardware (F16C), else Eigen's half, which converts in
// software, and which clang before 15 needs (it has no _Float16 on x86-64).
// For 1 M floats here: _Float16 with F16C encodes in 0.55 ms, Eigen's half
// in 2.6 ms; without F16C, _Float16 falls back to libgcc's conversion, 12 ms,
// and Eigen's half takes 2.0 ms.
#if defined(__FLT16_MAX__) && defined(__F16C__)
#define DDL_HALF_IS_FLOAT16 1
#else
#include <Eigen/Core>
#endif

namespace ddl::parallel::detail {
namespace {

#ifdef DDL_HALF_IS_FLOAT16
using Half = _Float16;
#else
using Half = Eigen::half;
#endif
static_assert(sizeof(Half) == sizeof(std::uint16_t) && std::is_trivially_copyable_v<Half>);

}  // namespace

void encode_half(const float* values, std::uint16_t* bits, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    bits[i] = std::bit_cast<std::uint16_t>(static_cast<Half>(values[i]));
  }
}

void decode_half(const std::uint16_t* bits, float* values, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    values[i] = static_cast<float>(std::bit_cast<Half>(bits[i]));
  }
}

}  // namespace ddl::parallel::detail
