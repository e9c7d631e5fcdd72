// Random shapes and values for the core tests, and the float comparison
// whose report names the worst element.
#include "test_data.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

namespace ddl::test {

std::int64_t awkward_size(std::mt19937& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, kAwkwardSizes.size() - 1);
  return kAwkwardSizes[pick(rng)];
}

Shape random_shape(std::mt19937& rng, int rank, std::int64_t max_numel) {
  for (;;) {
    std::vector<std::int64_t> dims;
    for (int d = 0; d < rank; ++d) dims.push_back(awkward_size(rng));
    const Shape shape(dims);
    if (shape.numel() <= max_numel) return shape;
  }
}

Tensor uniform_tensor(const Shape& shape, Generator& generator, float low, float high, const Device& device) {
  return uniform(shape, low, high, TensorOptions{}.with_device(device), &generator);
}

Tensor positive_tensor(const Shape& shape, Generator& generator, const Device& device) {
  return uniform_tensor(shape, generator, 0.5f, 2.0f, device);
}

Tensor away_from_zero_tensor(const Shape& shape, Generator& generator, const Device& device) {
  std::vector<float> magnitude = uniform(shape, 0.5f, 1.5f, {}, &generator).to_vector<float>();
  const std::vector<float> sign = uniform(shape, 0.0f, 1.0f, {}, &generator).to_vector<float>();
  for (std::size_t i = 0; i < magnitude.size(); ++i) {
    if (sign[i] < 0.5f) magnitude[i] = -magnitude[i];
  }
  return from_vector(magnitude, shape, TensorOptions{}.with_device(device));
}

Tensor distinct_tensor(const Shape& shape, std::mt19937& rng, const Device& device, float spacing) {
  const auto n = static_cast<std::size_t>(shape.numel());
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = spacing * (static_cast<float>(i) - 0.5f * static_cast<float>(n));
  std::shuffle(values.begin(), values.end(), rng);
  return from_vector(values, shape, TensorOptions{}.with_device(device));
}

LabelledLogits confident_logits(std::int64_t rows, std::int64_t classes, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> offset(20.0f, 100.0f), noise(-1.0f, 1.0f), margin(0.0f, 40.0f);
  LabelledLogits out;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float base = offset(rng) * (r % 2 == 0 ? 1.0f : -1.0f);
    const std::int64_t label = r % classes;
    const auto row = static_cast<std::ptrdiff_t>(out.logits.size());
    for (std::int64_t c = 0; c < classes; ++c) out.logits.push_back(base + noise(rng));
    float* values = out.logits.data() + row;
    switch (r % 4) {
      case 0:
        values[label] = base + 1.0f + margin(rng);
        break;  // wins, by a little or by far
      case 1:
        values[label] = base - 1.0f - margin(rng);
        break;  // loses by far
      case 2:
        values[label] = values[(label + 1) % classes] = base + 2.0f;
        break;  // a tie for the top
      default:
        break;  // in the crowd
    }
    out.labels.push_back(label);
  }
  return out;
}

ProductReference product_reference(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m,
                                   std::int64_t k, std::int64_t n) {
  REQUIRE((a.size() == static_cast<std::size_t>(m * k) && b.size() == static_cast<std::size_t>(k * n)));
  ProductReference r{std::vector<double>(static_cast<std::size_t>(m * n)),
                     std::vector<double>(static_cast<std::size_t>(m * n))};
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t q = 0; q < k; ++q) {
        const double term =
            static_cast<double>(a[static_cast<std::size_t>(i * k + q)]) * b[static_cast<std::size_t>(q * n + j)];
        r.value[static_cast<std::size_t>(i * n + j)] += term;
        r.magnitude[static_cast<std::size_t>(i * n + j)] += std::abs(term);
      }
    }
  }
  return r;
}

std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  REQUIRE(x.size() == static_cast<std::size_t>(rows * cols));
  std::vector<float> t(x.size());
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j)
      t[static_cast<std::size_t>(j * rows + i)] = x[static_cast<std::size_t>(i * cols + j)];
  }
  return t;
}

void add_weight_gradient_reference(const Tensor& x, const Tensor& g, std::vector<double>& expected,
                                   std::vector<double>& magnitude) {
  const std::int64_t rows = x.size(0), in = x.size(1), out = g.size(1);
  REQUIRE(g.size(0) == rows);
  REQUIRE((expected.size() == static_cast<std::size_t>(in * out) && magnitude.size() == expected.size()));
  const std::vector<float> xs = x.to_vector<float>(), gs = g.to_vector<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < in; ++i) {
      for (std::int64_t o = 0; o < out; ++o) {
        const double product = static_cast<double>(xs[static_cast<std::size_t>(r * in + i)]) *
                               static_cast<double>(gs[static_cast<std::size_t>(r * out + o)]);
        expected[static_cast<std::size_t>(i * out + o)] += product;
        magnitude[static_cast<std::size_t>(i * out + o)] += std::abs(product);
      }
    }
  }
}

bool within_dot_product_bound(const Tensor& actual, const std::vector<double>& expected,
                              const std::vector<double>& magnitude, std::int64_t terms, double* worst_ratio) {
  const std::vector<float> a = actual.to_vector<float>();
  REQUIRE(a.size() == expected.size());
  const double unit = std::ldexp(1.0, -24);
  bool ok = true;
  *worst_ratio = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(a[i] - expected[i]);
    const double bound = static_cast<double>(terms) * unit * magnitude[i] + unit * std::abs(expected[i]);
    *worst_ratio = std::max(*worst_ratio, error / (unit * std::max(magnitude[i], 1e-30)));
    ok = ok && error <= bound;
  }
  return ok;
}

std::vector<float> bf16_rounded(std::vector<float> values) {
  for (float& value : values) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&value, &bits, sizeof(bits));
  }
  return values;
}

std::vector<double> reference_log_softmax(const float* row, std::int64_t n) {
  const auto top = static_cast<std::int64_t>(std::max_element(row, row + n) - row);
  const double peak = row[top];
  double rest = 0.0;
  for (std::int64_t k = 0; k < n; ++k) {
    if (k != top) rest += std::exp(static_cast<double>(row[k]) - peak);
  }
  std::vector<double> log_p;
  for (std::int64_t k = 0; k < n; ++k) log_p.push_back((static_cast<double>(row[k]) - peak) - std::log1p(rest));
  return log_p;
}

std::ostream& operator<<(std::ostream& os, const Comparison& comparison) {
  return os << (comparison.ok ? "ok" : comparison.report);
}

Comparison all_close(const std::vector<float>& actual, const std::vector<float>& expected, double atol, double rtol) {
  return all_close(actual, expected, atol, rtol, {});
}

Comparison all_close(const std::vector<float>& actual, const std::vector<float>& expected, double atol, double rtol,
                     const std::vector<double>& also_allowed) {
  if (actual.size() != expected.size()) {
    return {false, "sizes differ: actual has " + std::to_string(actual.size()) + " elements, expected " +
                       std::to_string(expected.size())};
  }
  REQUIRE((also_allowed.empty() || also_allowed.size() == expected.size()));
  const auto allowed_at = [&](std::size_t i) {
    return atol + rtol * std::abs(static_cast<double>(expected[i])) + (also_allowed.empty() ? 0.0 : also_allowed[i]);
  };
  std::size_t worst = 0, failures = 0;
  double worst_excess = -1.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const double allowed = allowed_at(i);
    const double error = std::abs(a - e);
    // NaN anywhere counts as the worst possible error.
    const double excess = std::isnan(error) ? INFINITY : error - allowed;
    if (!(error <= allowed)) ++failures;
    if (excess > worst_excess || i == 0) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (failures == 0) return {};
  std::ostringstream report;
  report.precision(9);
  report << failures << " of " << actual.size() << " elements differ; worst at flat index " << worst << ": actual "
         << actual[worst] << ", expected " << expected[worst] << " (|diff| "
         << std::abs(static_cast<double>(actual[worst]) - expected[worst]) << ", allowed " << allowed_at(worst) << ")";
  return {false, report.str()};
}

Comparison all_close(const Tensor& actual, const std::vector<float>& expected, double atol, double rtol) {
  return all_close(actual.to_vector<float>(), expected, atol, rtol);
}

Comparison all_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  if (actual.shape() != expected.shape()) {
    return {false, "shapes differ: actual " + actual.shape().str() + ", expected " + expected.shape().str()};
  }
  return all_close(actual.to_vector<float>(), expected.to_vector<float>(), atol, rtol);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ha = a.detach().to(cpu()), hb = b.detach().to(cpu());
  return a.nbytes() == 0 || std::memcmp(ha.raw_data(), hb.raw_data(), a.nbytes()) == 0;
}

namespace detail {

Comparison check_message(bool thrown, const std::string& message, const std::vector<std::string>& parts) {
  if (!thrown) return {false, "no ddl::Error was thrown"};
  std::vector<std::string> missing;
  for (const std::string& part : parts) {
    if (message.find(part) == std::string::npos) missing.push_back(part);
  }
  if (missing.empty()) return {};
  std::string report = "the message \"" + message + "\" does not mention";
  for (const std::string& part : missing) report += " \"" + part + "\"";
  return {false, report};
}

}  // namespace detail
}  // namespace ddl::test
