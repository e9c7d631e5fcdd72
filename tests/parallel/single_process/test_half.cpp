// float16 on the wire (parallel/collectives/half.hpp): decoding is exact for
// all 65536 patterns, and encoding rounds to the nearest float16, ties to
// even, with overflow to infinity. Checked against a decoder written here in
// float64 from IEEE 754's definition, so whichever type converts (_Float16
// under g++ with F16C, Eigen's half under clang 14 in the sanitizer builds)
// is held to the same rule.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <ddl/parallel/collectives/half.hpp>

namespace ddl::test {
namespace {

constexpr std::uint16_t kInfinityBits = 0x7C00;

// The magnitude of a float16 pattern without its sign, from the definition:
// subnormals are m * 2^-24, normals (1 + m / 1024) * 2^(e - 15). The
// infinity pattern counts as 2^16, where rounding puts the overflow
// threshold (65520 rounds up to it, ties to even).
double reference_magnitude(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  if (exponent == 0) return std::ldexp(mantissa, -24);
  if (exponent == 0x1F) return std::ldexp(1.0, 16);
  return std::ldexp(1024 + mantissa, exponent - 25);
}

std::uint16_t encode(float value) {
  std::uint16_t bits = 0;
  parallel::detail::encode_half(&value, &bits, 1);
  return bits;
}

// `bits` is `value` rounded to the nearest float16, ties to the even pattern.
void check_rounded(float value, std::uint16_t bits) {
  CAPTURE(value);
  CAPTURE(bits);
  CHECK((bits >> 15) == (std::signbit(value) ? 1 : 0));
  const std::uint16_t magnitude_bits = bits & 0x7FFF;
  REQUIRE(magnitude_bits <= kInfinityBits);  // a finite input never becomes NaN
  const double target = std::fabs(static_cast<double>(value));
  const double error = std::fabs(target - reference_magnitude(magnitude_bits));
  for (const int step : {-1, 1}) {
    const int neighbour = magnitude_bits + step;
    if (neighbour < 0 || neighbour > kInfinityBits) continue;
    const double other = std::fabs(target - reference_magnitude(static_cast<std::uint16_t>(neighbour)));
    CHECK(error <= other);
    if (error == other) CHECK(magnitude_bits % 2 == 0);
  }
}

TEST_CASE("float16 wire format: every one of the 65536 patterns decodes exactly") {
  std::vector<std::uint16_t> bits(65536);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  std::vector<float> values(bits.size());
  parallel::detail::decode_half(bits.data(), values.data(), static_cast<std::int64_t>(bits.size()));
  for (std::size_t i = 0; i < bits.size(); ++i) {
    CAPTURE(i);
    const bool negative = (i & 0x8000) != 0;
    const int exponent = (i >> 10) & 0x1F;
    if (exponent == 0x1F && (i & 0x3FF) != 0) {
      CHECK(std::isnan(values[i]));
      continue;
    }
    const double magnitude =
        exponent == 0x1F ? std::numeric_limits<double>::infinity() : reference_magnitude(static_cast<std::uint16_t>(i));
    CHECK(static_cast<double>(values[i]) == (negative ? -magnitude : magnitude));
    CHECK(std::signbit(values[i]) == negative);
  }
}

TEST_CASE("float16 wire format: encoding rounds to nearest, ties to even, and overflows to infinity") {
  SUBCASE("random floats over float16's range and past it") {
    std::mt19937 generator(20261127);
    std::uniform_int_distribution<int> exponent(-27, 17);
    std::uniform_real_distribution<float> fraction(1.0f, 2.0f);
    std::vector<float> values;
    for (int i = 0; i < 20000; ++i) {
      const float sign = (i % 2 == 0) ? 1.0f : -1.0f;
      values.push_back(sign * std::ldexp(fraction(generator), exponent(generator)));
    }
    std::vector<std::uint16_t> bits(values.size());
    parallel::detail::encode_half(values.data(), bits.data(), static_cast<std::int64_t>(values.size()));
    for (std::size_t i = 0; i < values.size(); ++i) check_rounded(values[i], bits[i]);
  }
  SUBCASE("exact midpoints between neighbouring float16 values go to the even one") {
    // Every midpoint of two finite float16 magnitudes is a float (it needs
    // 12 significant bits), so these are true ties, subnormals included.
    for (std::uint16_t lower = 0; lower < 0x7BFF; lower += 7) {
      const double midpoint = (reference_magnitude(lower) + reference_magnitude(lower + 1)) / 2;
      const float value = static_cast<float>(midpoint);
      REQUIRE(static_cast<double>(value) == midpoint);
      const std::uint16_t bits = encode(value);
      check_rounded(value, bits);
      CHECK((bits & 0x7FFF) == (lower % 2 == 0 ? lower : lower + 1));
      check_rounded(-value, encode(-value));
    }
  }
  SUBCASE("the edges: the largest finite value, the overflow threshold, zeros, infinities, NaN") {
    CHECK(encode(65504.0f) == 0x7BFF);
    CHECK(encode(std::nextafter(65520.0f, 0.0f)) == 0x7BFF);
    CHECK(encode(65520.0f) == kInfinityBits);  // the tie between 65504 and 2^16 goes to the even pattern
    CHECK(encode(1e6f) == kInfinityBits);
    CHECK(encode(-1e30f) == 0xFC00);
    CHECK(encode(std::numeric_limits<float>::infinity()) == kInfinityBits);
    CHECK(encode(0.0f) == 0x0000);
    CHECK(encode(-0.0f) == 0x8000);
    CHECK(encode(std::ldexp(1.0f, -24)) == 0x0001);  // the smallest subnormal
    CHECK(encode(std::ldexp(1.0f, -25)) == 0x0000);  // half of it: a tie, to zero
    CHECK(encode(-std::ldexp(1.0f, -26)) == 0x8000);  // too small: a signed zero
    const std::uint16_t nan = encode(std::numeric_limits<float>::quiet_NaN());
    CHECK((nan & 0x7C00) == 0x7C00);
    CHECK((nan & 0x3FF) != 0);
  }
}

}  // namespace
}  // namespace ddl::test
