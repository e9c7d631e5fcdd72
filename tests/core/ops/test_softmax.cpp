// Softmax and log-softmax (core/ops/softmax.cpp): values along each dim
// against the textbook formula, stability for large logits, gradients.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {

// exp(x_k) / sum_j exp(x_j) along `dim`, in double, without any shift:
// fine for the |x| <= 3 used here.
std::vector<float> naive_softmax(const std::vector<float>& x, const Shape& shape, int dim, bool take_log) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= shape[d];
  for (int d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  const std::int64_t n = shape[dim];
  std::vector<float> y(x.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      double total = 0.0;
      for (std::int64_t k = 0; k < n; ++k)
        total += std::exp(static_cast<double>(x[static_cast<std::size_t>((o * n + k) * inner + i)]));
      for (std::int64_t k = 0; k < n; ++k) {
        const auto at = static_cast<std::size_t>((o * n + k) * inner + i);
        const double p = std::exp(static_cast<double>(x[at])) / total;
        y[at] = static_cast<float>(take_log ? std::log(p) : p);
      }
    }
  }
  return y;
}

}  // namespace

TEST_CASE("softmax and log_softmax: along each dim match the naive formula") {
  std::mt19937 rng(501);
  Generator generator(501);
  for (int rank = 1; rank <= 4; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 1000);
    const Tensor x = test::uniform_tensor(shape, generator, -3.0f, 3.0f);
    const std::vector<float> values = x.to_vector<float>();
    for (int dim = 0; dim < rank; ++dim) {
      CAPTURE(shape);
      CAPTURE(dim);
      CHECK(all_close(softmax(x, dim), naive_softmax(values, shape, dim, false), 1e-6, 1e-5));
      CHECK(all_close(log_softmax(x, dim), naive_softmax(values, shape, dim, true), 1e-5, 1e-5));
    }
  }
}

TEST_CASE("softmax: each lane sums to one") {
  Generator generator(502);
  const Tensor x = test::uniform_tensor({7, 13, 3}, generator, -3.0f, 3.0f);
  for (int dim = 0; dim < 3; ++dim) {
    CAPTURE(dim);
    const std::vector<float> totals = sum(softmax(x, dim), dim).to_vector<float>();
    CHECK(all_close(totals, std::vector<float>(totals.size(), 1.0f), 1e-6, 0.0));
  }
}

TEST_CASE("softmax and log_softmax: the default dim is the last") {
  Generator generator(503);
  const Tensor x = test::uniform_tensor({5, 7}, generator);
  CHECK(softmax(x).to_vector<float>() == softmax(x, 1).to_vector<float>());
  CHECK(log_softmax(x).to_vector<float>() == log_softmax(x, -1).to_vector<float>());
}

TEST_CASE("softmax and log_softmax: large logits stay finite and exact") {
  // Unshifted, exp(1e4) overflows; shifted by the max it is exp(0), exp(-1), exp(-1e4).
  const Tensor x = from_vector(std::vector<float>{1e4f, 1e4f - 1.0f, 0.0f, -1e4f, -1e4f + 2.0f, -1e4f}, {2, 3});
  const double e = std::exp(-1.0);
  CHECK(all_close(softmax(x, 1),
                  {static_cast<float>(1 / (1 + e)), static_cast<float>(e / (1 + e)), 0.0f,
                   static_cast<float>(1 / (2 + std::exp(2.0))), static_cast<float>(std::exp(2.0) / (2 + std::exp(2.0))),
                   static_cast<float>(1 / (2 + std::exp(2.0)))},
                  1e-6, 1e-6));
  const std::vector<float> logs = log_softmax(x, 1).to_vector<float>();
  CHECK(logs[0] == doctest::Approx(-std::log1p(e)).epsilon(1e-6));
  CHECK(logs[2] == doctest::Approx(-1e4 - std::log1p(e)).epsilon(1e-6));
  for (const float v : logs) CHECK(std::isfinite(v));
}

TEST_CASE("softmax and log_softmax: every value is float32's rounding of the exact one, confident and tied rows included") {
  constexpr std::int64_t kRows = 400, kClasses = 10;
  const test::LabelledLogits data = test::confident_logits(kRows, kClasses, 505);
  std::vector<float> log_exact, exact;
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (const double log_p : test::reference_log_softmax(data.logits.data() + r * kClasses, kClasses)) {
      log_exact.push_back(static_cast<float>(log_p));
      exact.push_back(static_cast<float>(std::exp(log_p)));
    }
  }
  // One rounding to float and double's own error, relative: a winner's
  // log-probability of -1e-16 and a loser's probability of 1e-40 included.
  const Tensor x = from_vector(data.logits, {kRows, kClasses});
  const double tiny = std::numeric_limits<float>::denorm_min(), eps = std::numeric_limits<float>::epsilon();
  CHECK(all_close(log_softmax(x, 1), log_exact, tiny, eps));
  CHECK(all_close(softmax(x, 1), exact, tiny, eps));
  // The same along dim 0 of the transpose: lanes with a stride.
  const Tensor columns = transpose(x);
  CHECK(all_close(transpose(log_softmax(columns, 0)), log_exact, tiny, eps));
}

TEST_CASE("softmax and log_softmax: gradients along each dim match finite differences") {
  std::mt19937 rng(504);
  Generator generator(504);
  for (int rank = 1; rank <= 4; ++rank) {
    const Shape shape = test::random_shape(rng, rank, 100);
    const Tensor x = test::uniform_tensor(shape, generator, -2.0f, 2.0f);
    for (int dim = 0; dim < rank; ++dim) {
      CAPTURE(shape);
      CAPTURE(dim);
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {x}));
      CHECK(gradcheck([&](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {x}));
    }
  }
}

TEST_CASE("softmax: an empty tensor gives an empty result") {
  CHECK(softmax(zeros({3, 0}), 1).shape() == Shape{3, 0});
  CHECK(log_softmax(zeros({0, 4}), 1).shape() == Shape{0, 4});
  CHECK(softmax(zeros({3, 0}), 0).shape() == Shape{3, 0});
}

TEST_CASE("softmax and log_softmax: a dim out of range throws naming the op, the dim and the shape") {
  CHECK(throws_error_mentioning([] { softmax(zeros({2, 3}), 2); }, {"softmax", "dim 2", "[2, 3]"}));
  CHECK(throws_error_mentioning([] { log_softmax(zeros({2, 3}), -3); }, {"log_softmax", "dim -3", "[2, 3]"}));
}

TEST_CASE("softmax: an integer tensor throws naming the op and dtype") {
  CHECK(throws_error_mentioning([] { softmax(arange(3, TensorOptions{}.with_dtype(DType::Int64))); },
                                {"softmax", "int64", "[3]"}));
}
