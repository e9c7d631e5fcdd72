// Counter-based random numbers (core/random.hpp, uniform/normal in
// core/ops.hpp): reproducible per seed, element i a pure function of
// (seed, offset + i), and the right distributions.
//
// Statistical bounds: every moment is checked within 6 standard errors of
// its exact value for n = 2^20 samples. For a fixed seed the test is
// deterministic; 6 SE is what keeps it from being a coin toss across seeds
// (a correct generator fails one such check with probability 2e-9).
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

namespace {

constexpr std::int64_t kSamples = 1 << 20;
constexpr double kStandardErrors = 6.0;

struct Moments {
  double mean = 0.0;
  double variance = 0.0;
};

Moments moments(const std::vector<float>& values) {
  Moments m;
  for (const float v : values) m.mean += v;
  m.mean /= static_cast<double>(values.size());
  for (const float v : values) m.variance += (v - m.mean) * (v - m.mean);
  m.variance /= static_cast<double>(values.size() - 1);
  return m;
}

// How many positions hold bitwise-equal values.
std::size_t equal_count(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) count += a[i] == b[i] ? 1 : 0;
  return count;
}

}  // namespace

TEST_CASE("Philox4x32: matches the Random123 known-answer vector for counter 0 and key 0") {
  // Random123 kat_vectors, "philox4x32 10" with all-zero counter and key.
  const Philox4x32 block(0, 0);
  CHECK(block.out[0] == 0x6627e8d5u);
  CHECK(block.out[1] == 0xe169c58du);
  CHECK(block.out[2] == 0xbc57ac4cu);
  CHECK(block.out[3] == 0x9b00dbd8u);
}

TEST_CASE("uint_to_unit_float: maps 32-bit words into the unit interval, excluding 0 and including 1") {
  CHECK(uint_to_unit_float(0u) > 0.0f);
  CHECK(uint_to_unit_float(0u) == doctest::Approx(1.0 / 16777216.0));
  CHECK(uint_to_unit_float(0xffffffffu) == 1.0f);
}

TEST_CASE("random: the same seed gives identical numbers") {
  Generator a(42), b(42);
  CHECK(uniform({1000}, 0.0f, 1.0f, {}, &a).to_vector<float>() ==
        uniform({1000}, 0.0f, 1.0f, {}, &b).to_vector<float>());
  CHECK(normal({1000}, 0.0f, 1.0f, {}, &a).to_vector<float>() == normal({1000}, 0.0f, 1.0f, {}, &b).to_vector<float>());
}

TEST_CASE("random: different seeds give different numbers") {
  Generator a(1), b(2);
  const auto ua = uniform({1000}, 0.0f, 1.0f, {}, &a).to_vector<float>();
  const auto ub = uniform({1000}, 0.0f, 1.0f, {}, &b).to_vector<float>();
  // 24-bit values: two independent streams agree by chance on ~1000/2^24.
  CHECK(equal_count(ua, ub) <= 1);
}

TEST_CASE("random: two consecutive draws from one generator differ and advance its offset") {
  Generator generator(42);
  const auto first = uniform({1000}, 0.0f, 1.0f, {}, &generator).to_vector<float>();
  CHECK(generator.offset() == 1000);
  const auto second = uniform({1000}, 0.0f, 1.0f, {}, &generator).to_vector<float>();
  CHECK(generator.offset() == 2000);
  CHECK(equal_count(first, second) <= 1);
}

TEST_CASE("random: element i does not depend on the size or shape of the draw") {
  for (const bool gaussian : {false, true}) {
    CAPTURE(gaussian);
    const auto draw = [&](const Shape& shape) {
      Generator generator(7);
      return (gaussian ? normal(shape, 0.0f, 1.0f, {}, &generator) : uniform(shape, 0.0f, 1.0f, {}, &generator))
          .to_vector<float>();
    };
    const auto small = draw({10});
    const auto large = draw({1 << 16});  // large enough to run on several threads
    const auto shaped = draw({2, 5});
    CHECK(std::equal(small.begin(), small.end(), large.begin()));
    CHECK(shaped == small);
  }
}

TEST_CASE("random: consecutive draws continue one stream, as one larger draw would") {
  Generator split(9), whole(9);
  const auto a = uniform({3}, 0.0f, 1.0f, {}, &split).to_vector<float>();
  const auto b = uniform({5}, 0.0f, 1.0f, {}, &split).to_vector<float>();
  const auto all = uniform({8}, 0.0f, 1.0f, {}, &whole).to_vector<float>();
  CHECK(std::equal(a.begin(), a.end(), all.begin()));
  CHECK(std::equal(b.begin(), b.end(), all.begin() + 3));
}

TEST_CASE("random: set_state resumes a stream at a given offset") {
  Generator generator(5);
  uniform({4}, 0.0f, 1.0f, {}, &generator);
  const auto expected = uniform({6}, 0.0f, 1.0f, {}, &generator).to_vector<float>();
  Generator resumed;
  resumed.set_state(5, 4);
  CHECK(uniform({6}, 0.0f, 1.0f, {}, &resumed).to_vector<float>() == expected);
}

TEST_CASE("random: manual_seed makes the default generator reproducible") {
  manual_seed(123);
  const auto first = uniform({16}).to_vector<float>();
  manual_seed(123);
  CHECK(uniform({16}).to_vector<float>() == first);
  CHECK(default_generator().seed() == 123);
  CHECK(default_generator().offset() == 16);
}

TEST_CASE("uniform: values lie between low inclusive and high exclusive and reach both ends") {
  Generator generator(3);
  const float low = -3.0f, high = 5.0f;
  const auto values = uniform({kSamples}, low, high, {}, &generator).to_vector<float>();
  const auto [min, max] = std::minmax_element(values.begin(), values.end());
  CHECK(*min >= low);
  CHECK(*max < high);
  // With 2^20 samples the extremes come within 1e-3 of the range ends
  // unless the generator misses a part of it.
  CHECK(*min < low + 1e-3f * (high - low));
  CHECK(*max > high - 1e-3f * (high - low));
}

TEST_CASE("uniform: mean and variance of U(0, 1) are 1/2 and 1/12 within 6 standard errors") {
  Generator generator(2024);
  const Moments m = moments(uniform({kSamples}, 0.0f, 1.0f, {}, &generator).to_vector<float>());
  const double n = kSamples;
  // SE(mean) = sqrt(var / n); SE(var) = sqrt((mu4 - var^2) / n), mu4 = 1/80.
  const double se_mean = std::sqrt(1.0 / 12.0 / n);
  const double se_var = std::sqrt((1.0 / 80.0 - 1.0 / 144.0) / n);
  CHECK(std::abs(m.mean - 0.5) < kStandardErrors * se_mean);
  CHECK(std::abs(m.variance - 1.0 / 12.0) < kStandardErrors * se_var);
}

TEST_CASE("uniform: each of 64 equal bins holds 1/64 of the samples within 6 standard errors") {
  Generator generator(77);
  const auto values = uniform({kSamples}, 0.0f, 1.0f, {}, &generator).to_vector<float>();
  constexpr int kBins = 64;
  std::vector<std::int64_t> counts(kBins, 0);
  for (const float v : values) ++counts[static_cast<std::size_t>(std::min(kBins - 1, static_cast<int>(v * kBins)))];
  const double p = 1.0 / kBins, expected = p * kSamples, se = std::sqrt(kSamples * p * (1.0 - p));
  for (int b = 0; b < kBins; ++b) {
    CAPTURE(b);
    CHECK(std::abs(static_cast<double>(counts[static_cast<std::size_t>(b)]) - expected) < kStandardErrors * se);
  }
}

TEST_CASE("normal: mean and variance of N(0, 1) are 0 and 1 within 6 standard errors") {
  Generator generator(2025);
  const Moments m = moments(normal({kSamples}, 0.0f, 1.0f, {}, &generator).to_vector<float>());
  const double n = kSamples;
  // SE(mean) = 1 / sqrt(n); SE(var) = sqrt(2 / n) for a Gaussian.
  CHECK(std::abs(m.mean) < kStandardErrors / std::sqrt(n));
  CHECK(std::abs(m.variance - 1.0) < kStandardErrors * std::sqrt(2.0 / n));
}

TEST_CASE("normal: the fraction within one sigma is 0.6827 within 6 standard errors") {
  Generator generator(31);
  const auto values = normal({kSamples}, 0.0f, 1.0f, {}, &generator).to_vector<float>();
  const auto inside = std::count_if(values.begin(), values.end(), [](float v) { return std::abs(v) < 1.0f; });
  const double p = std::erf(1.0 / std::sqrt(2.0));  // 0.682689...
  const double fraction = static_cast<double>(inside) / kSamples;
  CHECK(std::abs(fraction - p) < kStandardErrors * std::sqrt(p * (1.0 - p) / kSamples));
}

TEST_CASE("normal: mean and stddev arguments shift and scale the samples") {
  Generator generator(8);
  const Moments m = moments(normal({kSamples}, 3.0f, 2.0f, {}, &generator).to_vector<float>());
  const double n = kSamples;
  CHECK(std::abs(m.mean - 3.0) < kStandardErrors * 2.0 / std::sqrt(n));
  CHECK(std::abs(m.variance - 4.0) < kStandardErrors * 4.0 * std::sqrt(2.0 / n));
}

TEST_CASE("random: invalid arguments throw naming the op") {
  CHECK(throws_error_mentioning([] { uniform({2}, 1.0f, 0.0f); }, {"uniform", "low"}));
  CHECK(throws_error_mentioning([] { normal({2}, 0.0f, -1.0f); }, {"normal", "stddev"}));
  CHECK(throws_error_mentioning([] { uniform({2}, 0.0f, 1.0f, TensorOptions{}.with_dtype(DType::Int64)); },
                                {"uniform", "int64"}));
  CHECK(throws_error_mentioning([] { normal({2}, 0.0f, 1.0f, TensorOptions{}.with_dtype(DType::Int32)); },
                                {"normal", "int32"}));
}
