// Losses (layers/loss.cpp): cross-entropy (2-D and spatial), MSE and MAE
// against float64 references and finite differences for each reduction,
// the fused gradient against one-hot targets, stability for huge logits,
// errors.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/loss.hpp>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

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

// -log softmax(logits[r])[label[r]] for each row r, in double.
std::vector<double> reference_cross_entropy_rows(const std::vector<float>& logits,
                                                 const std::vector<std::int64_t>& labels, std::int64_t classes) {
  std::vector<double> rows;
  for (std::size_t r = 0; r < labels.size(); ++r) {
    double denominator = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) denominator += std::exp(static_cast<double>(logits[r * classes + c]));
    rows.push_back(std::log(denominator) - logits[r * classes + static_cast<std::size_t>(labels[r])]);
  }
  return rows;
}

// What each reduction makes of float64 per-sample or per-element values.
std::vector<float> reduced(const std::vector<double>& values, layers::Reduction reduction) {
  const double total = std::accumulate(values.begin(), values.end(), 0.0);
  switch (reduction) {
    case layers::Reduction::Mean:
      return {static_cast<float>(total / static_cast<double>(values.size()))};
    case layers::Reduction::Sum:
      return {static_cast<float>(total)};
    case layers::Reduction::None:
      break;
  }
  return {values.begin(), values.end()};
}

const std::vector<std::pair<layers::Reduction, const char*>> kReductions{
    {layers::Reduction::Mean, "mean"}, {layers::Reduction::Sum, "sum"}, {layers::Reduction::None, "none"}};

Tensor one_hot(const std::vector<std::int64_t>& labels, std::int64_t classes) {
  std::vector<float> values(labels.size() * static_cast<std::size_t>(classes), 0.0f);
  for (std::size_t r = 0; r < labels.size(); ++r) values[r * classes + static_cast<std::size_t>(labels[r])] = 1.0f;
  return from_vector(values, {static_cast<std::int64_t>(labels.size()), classes});
}

// Each row's loss and its gradient (softmax - one-hot) from float64
// log-probabilities, rounded once to float.
struct ExactRows {
  std::vector<float> losses, gradients;
};
ExactRows exact_rows(const test::LabelledLogits& data, std::int64_t classes) {
  ExactRows exact;
  for (std::size_t r = 0; r < data.labels.size(); ++r) {
    const std::vector<double> log_p = test::reference_log_softmax(data.logits.data() + r * classes, classes);
    const auto label = static_cast<std::size_t>(data.labels[r]);
    exact.losses.push_back(static_cast<float>(-log_p[label]));
    // p - 1 for the label by expm1: a confident row's gradient is -rest, not 0.
    for (std::size_t c = 0; c < log_p.size(); ++c)
      exact.gradients.push_back(static_cast<float>(c == label ? std::expm1(log_p[c]) : std::exp(log_p[c])));
  }
  return exact;
}

// Spatial logits [N, C, d1, ..., dk] hold row (n, p) of a [N·P, C] matrix at
// [n, c, p]: the layout a segmentation network's output has. Moves values
// from rows to that layout, or back.
std::vector<float> move_classes(const std::vector<float>& values, std::int64_t samples, std::int64_t classes,
                                bool to_spatial) {
  const auto positions = static_cast<std::int64_t>(values.size()) / (samples * classes);
  std::vector<float> moved(values.size());
  for (std::int64_t n = 0; n < samples; ++n)
    for (std::int64_t p = 0; p < positions; ++p)
      for (std::int64_t c = 0; c < classes; ++c) {
        const auto row = static_cast<std::size_t>((n * positions + p) * classes + c);
        const auto spatial = static_cast<std::size_t>((n * classes + c) * positions + p);
        if (to_spatial) {
          moved[spatial] = values[row];
        } else {
          moved[row] = values[spatial];
        }
      }
  return moved;
}

// [N, d1, ..., dk] of a spatial logits shape [N, C, d1, ..., dk].
Shape without_classes(const Shape& logits) {
  std::vector<std::int64_t> dims = logits.to_vector();
  dims.erase(dims.begin() + 1);
  return Shape(dims);
}

}  // namespace

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

TEST_CASE("cross_entropy: each row's loss and gradient are float32's rounding of the exact ones, confident and tied rows included") {
  constexpr std::int64_t kRows = 400, kClasses = 10;
  const test::LabelledLogits data = test::confident_logits(kRows, kClasses, 17);
  const Tensor logits = from_vector(data.logits, {kRows, kClasses}).set_requires_grad();
  const Tensor losses = layers::cross_entropy(logits, from_vector(data.labels, {kRows}), layers::Reduction::None);
  sum(losses).backward();
  const ExactRows exact = exact_rows(data, kClasses);
  // One rounding to float (half an ulp) and double's own error; losses of
  // 1e-16 included, so the tolerance is relative, with a denormal's floor.
  const double tiny = std::numeric_limits<float>::denorm_min(), eps = std::numeric_limits<float>::epsilon();
  CHECK(all_close(losses, exact.losses, tiny, eps));
  CHECK(all_close(logits.grad(), exact.gradients, tiny, eps));
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

TEST_CASE("mse_loss and mae_loss reject predictions and targets of different shapes") {
  CHECK(throws_error_mentioning(
      [] {
        layers::mse_loss(zeros({7, 3}), zeros({3, 7}));
      },
      {"mse_loss", "[7, 3]", "[3, 7]"}));
  CHECK(throws_error_mentioning([] { layers::mae_loss(zeros({2}), zeros({2, 1})); }, {"mae_loss", "[2]", "[2, 1]"}));
}

TEST_CASE("cross_entropy reduces by mean, sum or not at all, with int64, int32 or one-hot targets") {
  // Per-row losses are O(1) with float32 rounding of a few ulps; a sum of
  // N of them keeps that relative error.
  Generator generator(25);
  std::mt19937 rng(25);
  for (const auto& [n, classes] : {std::pair{1, 2}, {7, 10}, {13, 3}}) {
    const Tensor logits = test::uniform_tensor({n, classes}, generator, -3.0f, 3.0f);
    const auto labels = random_labels(n, classes, rng);
    const auto rows = reference_cross_entropy_rows(logits.to_vector<float>(), labels, classes);
    for (const auto& [reduction, reduction_name] : kReductions) {
      const std::string name = reduction_name;
      CAPTURE(name);
      const std::vector<float> expected = reduced(rows, reduction);
      const Tensor from_labels = layers::cross_entropy(logits, from_vector(labels, {n}), reduction);
      const std::vector<std::int32_t> labels32(labels.begin(), labels.end());
      const Tensor from_labels32 = layers::cross_entropy(logits, from_vector(labels32, {n}), reduction);
      const Tensor from_one_hot = layers::cross_entropy(logits, one_hot(labels, classes), reduction);
      CHECK(from_labels.shape() == (reduction == layers::Reduction::None ? Shape{n} : Shape{}));
      CHECK(from_one_hot.shape() == from_labels.shape());
      CHECK(all_close(from_labels, expected, 1e-6, 1e-5));
      CHECK(all_close(from_labels32, expected, 1e-6, 1e-5));
      CHECK(all_close(from_one_hot, expected, 1e-6, 1e-5));
    }
  }
}

TEST_CASE("cross_entropy gradients match finite differences for every reduction") {
  Generator generator(26);
  std::mt19937 rng(26);
  for (const auto& [n, classes] : {std::pair{1, 3}, {7, 5}, {5, 13}}) {
    const auto labels = random_labels(n, classes, rng);
    const Tensor logits = test::uniform_tensor({n, classes}, generator, -2.0f, 2.0f);
    for (const auto& [reduction, reduction_name] : kReductions) {
      const std::string name = reduction_name;
      CAPTURE(name);
      for (const Tensor& targets : {from_vector(labels, {n}), one_hot(labels, classes)}) {
        CHECK(gradcheck(
            [&, r = reduction](const std::vector<Tensor>& t) { return layers::cross_entropy(t[0], targets, r); },
            {logits}));
      }
    }
  }
}

TEST_CASE("cross_entropy over spatial logits: each position's loss and gradient are float32's rounding of the exact ones") {
  // Awkward extents, one to three spatial dims; confident and tied positions.
  for (const Shape& shape : {Shape{3, 5, 7, 2}, Shape{2, 4, 13}, Shape{1, 3, 2, 3, 5}, Shape{5, 2, 1, 1}}) {
    CAPTURE(shape);
    const std::int64_t samples = shape[0], classes = shape[1];
    const std::int64_t rows = shape.numel() / classes;
    const test::LabelledLogits data = test::confident_logits(rows, classes, 31);
    const Tensor logits = from_vector(move_classes(data.logits, samples, classes, true), shape).set_requires_grad();
    const Tensor losses =
        layers::cross_entropy(logits, from_vector(data.labels, without_classes(shape)), layers::Reduction::None);
    CHECK(losses.shape() == without_classes(shape));
    sum(losses).backward();
    const ExactRows exact = exact_rows(data, classes);
    const double tiny = std::numeric_limits<float>::denorm_min(), eps = std::numeric_limits<float>::epsilon();
    CHECK(all_close(losses, exact.losses, tiny, eps));
    CHECK(all_close(logits.grad(), move_classes(exact.gradients, samples, classes, true), tiny, eps));
  }
}

TEST_CASE("cross_entropy over spatial logits reduces by mean, sum or not at all, with int64, int32 or one-hot targets") {
  Generator generator(28);
  std::mt19937 rng(28);
  for (int trial = 0; trial < 6; ++trial) {
    const Shape shape = test::random_shape(rng, 3 + trial % 3, 400);
    CAPTURE(shape);
    const std::int64_t samples = shape[0], classes = shape[1];
    const Tensor logits = test::uniform_tensor(shape, generator, -3.0f, 3.0f);
    const auto labels = random_labels(shape.numel() / classes, classes, rng);
    const auto row_major = move_classes(logits.to_vector<float>(), samples, classes, false);
    const auto per_position = reference_cross_entropy_rows(row_major, labels, classes);
    const std::vector<std::int32_t> labels32(labels.begin(), labels.end());
    const Tensor one_hot_targets =
        from_vector(move_classes(one_hot(labels, classes).to_vector<float>(), samples, classes, true), shape);
    for (const auto& [reduction, reduction_name] : kReductions) {
      const std::string name = reduction_name;
      CAPTURE(name);
      const std::vector<float> expected = reduced(per_position, reduction);
      const Tensor from_labels = layers::cross_entropy(logits, from_vector(labels, without_classes(shape)), reduction);
      CHECK(from_labels.shape() == (reduction == layers::Reduction::None ? without_classes(shape) : Shape{}));
      CHECK(all_close(from_labels, expected, 1e-6, 1e-5));
      CHECK(all_close(layers::cross_entropy(logits, from_vector(labels32, without_classes(shape)), reduction),
                      expected, 1e-6, 1e-5));
      CHECK(all_close(layers::cross_entropy(logits, one_hot_targets, reduction), expected, 1e-6, 1e-5));
    }
  }
}

TEST_CASE("cross_entropy over spatial logits: gradients match finite differences for every reduction") {
  Generator generator(29);
  std::mt19937 rng(29);
  for (const Shape& shape : {Shape{2, 3, 5}, Shape{1, 2, 3, 2}, Shape{3, 5, 2, 1, 2}}) {
    CAPTURE(shape);
    const std::int64_t classes = shape[1];
    const auto labels = random_labels(shape.numel() / classes, classes, rng);
    const Tensor logits = test::uniform_tensor(shape, generator, -2.0f, 2.0f);
    const Tensor targets = from_vector(labels, without_classes(shape));
    for (const auto& [reduction, reduction_name] : kReductions) {
      const std::string name = reduction_name;
      CAPTURE(name);
      CHECK(gradcheck(
          [&, r = reduction](const std::vector<Tensor>& t) { return layers::cross_entropy(t[0], targets, r); },
          {logits}));
    }
  }
}

TEST_CASE("cross_entropy over spatial logits names both shapes when the targets do not fit") {
  const Tensor logits = zeros({2, 3, 4, 5});
  const TensorOptions int64{DType::Int64};
  CHECK(throws_error_mentioning([&] { layers::cross_entropy(logits, zeros({2, 5, 4}, int64)); },
                                {"cross_entropy", "[2, 5, 4]", "[2, 3, 4, 5]", "labels [2, 4, 5]"}));
  CHECK(throws_error_mentioning([&] { layers::cross_entropy(logits, zeros({2, 4, 5})); },
                                {"cross_entropy", "[2, 4, 5]", "[2, 3, 4, 5]", "one-hot"}));
  CHECK(throws_error_mentioning([&] { layers::cross_entropy(logits, zeros({2, 20}, int64)); },
                                {"cross_entropy", "[2, 20]", "[2, 3, 4, 5]"}));
  CHECK(throws_error_mentioning([&] { layers::cross_entropy(zeros({2, 3, 0}), zeros({2, 0}, int64)); },
                                {"cross_entropy", "[2, 3, 0]"}));
  std::vector<std::int64_t> labels(40, 1);
  labels[17] = 3;
  CHECK(throws_error_mentioning([&] { layers::cross_entropy(logits, from_vector(labels, {2, 4, 5})); },
                                {"cross_entropy", "label 3", "index 17", "3 classes"}));
}

TEST_CASE("mse_loss and mae_loss reduce by mean, sum or not at all, values and gradients") {
  Generator generator(27);
  std::mt19937 rng(27);
  for (int trial = 0; trial < 3; ++trial) {
    const Shape shape = test::random_shape(rng, 1 + trial);
    CAPTURE(shape);
    const Tensor prediction = test::away_from_zero_tensor(shape, generator);
    const Tensor target = test::uniform_tensor(shape, generator, -0.4f, 0.4f);
    const auto p = prediction.to_vector<float>(), t = target.to_vector<float>();
    std::vector<double> squared, absolute;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double difference = static_cast<double>(p[i]) - t[i];
      squared.push_back(difference * difference);
      absolute.push_back(std::abs(difference));
    }
    for (const auto& [reduction, reduction_name] : kReductions) {
      const std::string name = reduction_name;
      CAPTURE(name);
      const Tensor mse = layers::mse_loss(prediction, target, reduction);
      CHECK(mse.shape() == (reduction == layers::Reduction::None ? shape : Shape{}));
      CHECK(all_close(mse, reduced(squared, reduction), 1e-6, 1e-5));
      CHECK(all_close(layers::mae_loss(prediction, target, reduction), reduced(absolute, reduction), 1e-6, 1e-5));
      // |prediction| >= 0.5 > |target|: the difference never crosses |x|'s kink.
      CHECK(gradcheck([&, r = reduction](const std::vector<Tensor>& x) { return layers::mse_loss(x[0], target, r); },
                      {prediction}));
      CHECK(gradcheck([&, r = reduction](const std::vector<Tensor>& x) { return layers::mae_loss(x[0], target, r); },
                      {prediction}));
    }
  }
}

TEST_CASE("losses still convert to the Trainer's two-argument loss function") {
  const optim::LossFunction loss = layers::mse_loss;
  CHECK(loss(ones({2}), zeros({2})).item() == 1.0f);
}
