// Losses (layers/loss.cpp): cross-entropy against a reference, its fused
// gradient, stability for huge logits, one-hot targets, label errors; MSE
// and MAE values and gradients.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>

#include <cmath>
#include <random>

#include "support/gradcheck.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {

std::vector<std::int64_t> random_labels(std::int64_t n, std::int64_t classes, std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> pick(0, classes - 1);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (auto& label : labels) label = pick(rng);
  return labels;
}

double reference_cross_entropy(const std::vector<float>& logits, const std::vector<std::int64_t>& labels,
                               std::int64_t classes) {
  double total = 0.0;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    double denominator = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) denominator += std::exp(static_cast<double>(logits[r * classes + c]));
    total += std::log(denominator) - logits[r * classes + static_cast<std::size_t>(labels[r])];
  }
  return total / static_cast<double>(labels.size());
}

Tensor one_hot(const std::vector<std::int64_t>& labels, std::int64_t classes) {
  std::vector<float> values(labels.size() * static_cast<std::size_t>(classes), 0.0f);
  for (std::size_t r = 0; r < labels.size(); ++r) values[r * classes + static_cast<std::size_t>(labels[r])] = 1.0f;
  return from_vector(values, {static_cast<std::int64_t>(labels.size()), classes});
}

}  // namespace

TEST_CASE("cross_entropy with integer labels equals the mean negative log-likelihood") {
  Generator generator(21);
  std::mt19937 rng(21);
  for (const auto& [n, classes] : {std::pair{1, 2}, {7, 10}, {13, 3}}) {
    const Tensor logits = test::uniform_tensor({n, classes}, generator, -3.0f, 3.0f);
    const auto labels = random_labels(n, classes, rng);
    const double expected = reference_cross_entropy(logits.to_vector<float>(), labels, classes);
    CHECK(layers::cross_entropy(logits, from_vector(labels, {n})).item() == doctest::Approx(expected).epsilon(1e-5));
    std::vector<std::int32_t> labels32(labels.begin(), labels.end());
    CHECK(layers::cross_entropy(logits, from_vector(labels32, {n})).item() ==
          doctest::Approx(expected).epsilon(1e-5));
  }
}

TEST_CASE("cross_entropy gradient matches finite differences") {
  Generator generator(22);
  std::mt19937 rng(22);
  for (const auto& [n, classes] : {std::pair{1, 3}, {7, 5}, {5, 13}}) {
    const Tensor labels = from_vector(random_labels(n, classes, rng), {n});
    const Tensor logits = test::uniform_tensor({n, classes}, generator, -2.0f, 2.0f);
    CHECK(gradcheck([&](const std::vector<Tensor>& t) { return layers::cross_entropy(t[0], labels); }, {logits}));
  }
}

TEST_CASE("cross_entropy with one-hot targets equals integer labels, value and gradient") {
  Generator generator(23);
  std::mt19937 rng(23);
  const auto labels = random_labels(9, 7, rng);
  const Tensor a = test::uniform_tensor({9, 7}, generator).set_requires_grad();
  const Tensor b = a.detach().clone().set_requires_grad();
  const Tensor from_labels = layers::cross_entropy(a, from_vector(labels, {9}));
  const Tensor from_one_hot = layers::cross_entropy(b, one_hot(labels, 7));
  CHECK(from_labels.item() == doctest::Approx(from_one_hot.item()).epsilon(1e-6));
  from_labels.backward();
  from_one_hot.backward();
  CHECK(all_close(a.grad(), b.grad(), 1e-6, 1e-5));
}

TEST_CASE("cross_entropy stays finite for logits of +-1e4") {
  const Tensor logits = from_vector({1e4f, -1e4f, 0.0f, -1e4f, 1e4f, 1e4f}, {2, 3}).set_requires_grad();
  const Tensor labels = from_vector(std::vector<std::int64_t>{1, 0}, {2});
  const Tensor loss = layers::cross_entropy(logits, labels);
  // Row 0: the label's logit is 2e4 below the max; row 1: log 2 + 2e4.
  CHECK(loss.item() == doctest::Approx((2e4 + (2e4 + std::log(2.0))) / 2.0).epsilon(1e-6));
  loss.backward();
  for (const float g : logits.grad().to_vector<float>()) CHECK(std::isfinite(g));
  const Tensor soft = layers::cross_entropy(logits.detach(), from_vector({0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f}, {2, 3}));
  CHECK(std::isfinite(soft.item()));
}

TEST_CASE("cross_entropy rejects labels out of range and mismatched shapes") {
  const Tensor logits = zeros({3, 4});
  CHECK(throws_error_mentioning(
      [&] { layers::cross_entropy(logits, from_vector(std::vector<std::int64_t>{0, 4, 1}, {3})); },
      {"cross_entropy", "label 4", "index 1", "4 classes"}));
  CHECK(throws_error_mentioning(
      [&] { layers::cross_entropy(logits, from_vector(std::vector<std::int32_t>{0, -1, 1}, {3})); },
      {"cross_entropy", "label -1"}));
  CHECK(throws_error_mentioning(
      [&] { layers::cross_entropy(logits, from_vector(std::vector<std::int64_t>{0, 1}, {2})); },
      {"cross_entropy", "[2]", "[3, 4]"}));
  CHECK(throws_error_mentioning([&] { layers::cross_entropy(logits, zeros({3, 5})); },
                                {"cross_entropy", "[3, 5]", "[3, 4]"}));
}

TEST_CASE("mse_loss and mae_loss equal their definitions, with matching gradients") {
  Generator generator(24);
  const Tensor prediction = test::away_from_zero_tensor({7, 3}, generator);
  const Tensor target = test::uniform_tensor({7, 3}, generator, -0.4f, 0.4f);
  const auto p = prediction.to_vector<float>(), t = target.to_vector<float>();
  double squared = 0.0, absolute = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    squared += (p[i] - t[i]) * (p[i] - t[i]);
    absolute += std::abs(p[i] - t[i]);
  }
  CHECK(layers::mse_loss(prediction, target).item() == doctest::Approx(squared / 21.0).epsilon(1e-6));
  CHECK(layers::mae_loss(prediction, target).item() == doctest::Approx(absolute / 21.0).epsilon(1e-6));
  // |prediction| >= 0.5 > |target|: the difference never crosses |x|'s kink.
  CHECK(gradcheck([&](const std::vector<Tensor>& x) { return layers::mse_loss(x[0], target); }, {prediction}));
  CHECK(gradcheck([&](const std::vector<Tensor>& x) { return layers::mae_loss(x[0], target); }, {prediction}));
  CHECK(throws_error_mentioning([&] { layers::mse_loss(prediction, zeros({3, 7})); }, {"mse_loss", "[7, 3]", "[3, 7]"}));
}
