// Metrics and logs (optim/engine/metrics.hpp, logs.hpp, progress.hpp): accuracy
// (per sample or per pixel), mean absolute error and mean IoU summed over
// samples, not averaged over batches, sums a strategy can add up over ranks,
// errors naming shapes and names, and the duration format of the progress
// output.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/optim/engine/logs.hpp>
#include <ddl/optim/engine/metrics.hpp>
#include <ddl/optim/engine/progress.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::optim::Metric;
using ddl::optim::MetricAccumulator;
using ddl::test::throws_error_mentioning;

namespace {

// A batch's mean loss as the Trainer hands it over: a float32 scalar.
Tensor scalar_loss(double value) { return full(Shape{}, value); }

// Five rows of three logits whose arg-maxes are 2, 0, 1, 1, 2 (no ties).
Tensor five_logits() {
  return from_vector({0.1f, 0.2f, 0.9f,     //
                      1.5f, -1.0f, 0.0f,    //
                      0.0f, 3.0f, 2.0f,     //
                      -2.0f, -1.0f, -3.0f,  //
                      0.3f, 0.2f, 0.4f},
                     {5, 3});
}

// Labels for five_logits(): rows 0, 1 and 3 correct, rows 2 and 4 wrong.
const std::vector<std::int64_t> kFiveLabels{2, 0, 2, 1, 0};

std::vector<std::string> names_of(const optim::Logs& logs) {
  std::vector<std::string> names;
  for (const auto& entry : logs) names.push_back(entry.first);
  return names;
}

// Segmentation logits [2, 3, 2, 2] whose arg-max maps are
// sample 0: [[0, 1], [2, 2]] and sample 1: [[1, 1], [0, 2]] (no ties).
// With `extra_classes` more classes scoring below every other.
Tensor segmentation_logits(std::int64_t extra_classes = 0) {
  const std::vector<float> planes{5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 5,   // sample 0: classes 0, 1, 2
                                  0, 0, 5, 0, 5, 5, 0, 0, 0, 0, 0, 5};  // sample 1
  std::vector<float> values;
  for (std::size_t n = 0; n < 2; ++n) {
    values.insert(values.end(), planes.begin() + 12 * n, planes.begin() + 12 * (n + 1));
    values.insert(values.end(), static_cast<std::size_t>(4 * extra_classes), -9.0f);
  }
  return from_vector(values, {2, 3 + extra_classes, 2, 2});
}

// Against segmentation_logits(): sample 0 labels [[0, 1], [1, 0]] (2 of 4
// right), sample 1 [[1, 1], [0, 1]] (3 of 4 right).
const std::vector<std::int64_t> kSegmentationLabels{0, 1, 1, 0, 1, 1, 0, 1};

// The class of each position of outputs [B, C, P] (the first largest score)
// and per class the positions predicted and labelled alike and either way,
// all counted in the test, apart from the library's argmax.
struct ReferenceCounts {
  std::vector<double> sample_accuracy, intersection, union_of;
};
ReferenceCounts reference_counts(const std::vector<float>& logits, const std::vector<std::int64_t>& labels,
                                 std::int64_t samples, std::int64_t classes) {
  const auto positions = static_cast<std::int64_t>(labels.size()) / samples;
  ReferenceCounts counts{{}, std::vector<double>(classes, 0.0), std::vector<double>(classes, 0.0)};
  for (std::int64_t n = 0; n < samples; ++n) {
    double correct = 0.0;
    for (std::int64_t p = 0; p < positions; ++p) {
      std::int64_t best = 0;
      for (std::int64_t c = 1; c < classes; ++c) {
        if (logits[(n * classes + c) * positions + p] > logits[(n * classes + best) * positions + p]) best = c;
      }
      const std::int64_t label = labels[n * positions + p];
      correct += best == label ? 1.0 : 0.0;
      counts.intersection[best] += best == label ? 1.0 : 0.0;
      counts.union_of[best] += 1.0;
      counts.union_of[label] += best == label ? 0.0 : 1.0;
    }
    counts.sample_accuracy.push_back(correct / static_cast<double>(positions));
  }
  return counts;
}

}  // namespace

TEST_CASE("MetricAccumulator: accuracy is the fraction of rows whose largest logit is the int32 label") {
  MetricAccumulator metrics({Metric::accuracy});
  const std::vector<std::int32_t> labels(kFiveLabels.begin(), kFiveLabels.end());
  metrics.add(five_logits(), from_vector(labels, {5}), scalar_loss(1.0));
  CHECK(metrics.samples() == 5.0);
  CHECK(metrics.logs().at("accuracy") == doctest::Approx(3.0 / 5.0));
}

TEST_CASE("MetricAccumulator: accuracy accepts int64 labels") {
  MetricAccumulator metrics({Metric::accuracy});
  metrics.add(five_logits(), from_vector(kFiveLabels, {5}), scalar_loss(1.0));
  CHECK(metrics.logs().at("accuracy") == doctest::Approx(3.0 / 5.0));
}

TEST_CASE("MetricAccumulator: accuracy accepts one-hot float rows as targets") {
  std::vector<float> one_hot(15, 0.0f);
  for (std::size_t i = 0; i < kFiveLabels.size(); ++i) one_hot[3 * i + static_cast<std::size_t>(kFiveLabels[i])] = 1.0f;
  MetricAccumulator metrics({Metric::accuracy});
  metrics.add(five_logits(), from_vector(one_hot, {5, 3}), scalar_loss(1.0));
  CHECK(metrics.logs().at("accuracy") == doctest::Approx(3.0 / 5.0));
}

TEST_CASE("MetricAccumulator: accuracy over several batches counts samples, not the mean of batch accuracies") {
  MetricAccumulator metrics({Metric::accuracy});
  const Tensor logits = five_logits();
  // Batch of 1 (row 0, correct), batch of 3 (rows 1-3, 2 correct), batch of 1 (row 4, wrong).
  metrics.add(slice(logits, 0, 1), from_vector(std::vector<std::int64_t>{2}, {1}), scalar_loss(1.0));
  metrics.add(slice(logits, 1, 4), from_vector(std::vector<std::int64_t>{0, 2, 1}, {3}), scalar_loss(1.0));
  metrics.add(slice(logits, 4, 5), from_vector(std::vector<std::int64_t>{0}, {1}), scalar_loss(1.0));
  CHECK(metrics.samples() == 5.0);
  // 3 of 5 samples; the mean of the batches' accuracies would be (1 + 2/3 + 0) / 3.
  CHECK(metrics.logs().at("accuracy") == doctest::Approx(3.0 / 5.0));
}

TEST_CASE("MetricAccumulator: mae is the mean absolute error over every element of every batch") {
  Generator generator(17);
  const Tensor first_output = normal({7, 3}, 0.0f, 1.0f, {}, &generator);
  const Tensor first_target = normal({7, 3}, 0.0f, 1.0f, {}, &generator);
  const Tensor second_output = normal({2, 3}, 0.0f, 1.0f, {}, &generator);
  const Tensor second_target = normal({2, 3}, 0.0f, 1.0f, {}, &generator);
  MetricAccumulator metrics({Metric::mae});
  metrics.add(first_output, first_target, scalar_loss(0.0));
  metrics.add(second_output, second_target, scalar_loss(0.0));

  double total = 0.0;
  for (const auto& [output, target] :
       {std::pair{first_output, first_target}, std::pair{second_output, second_target}}) {
    const auto o = output.to_vector<float>();
    const auto t = target.to_vector<float>();
    for (std::size_t i = 0; i < o.size(); ++i) total += std::abs(static_cast<double>(o[i]) - t[i]);
  }
  CHECK(metrics.logs().at("mae") == doctest::Approx(total / 27.0).epsilon(1e-6));
}

TEST_CASE("MetricAccumulator: the loss is the mean of the batch losses weighted by batch size") {
  MetricAccumulator metrics;
  const Tensor logits = five_logits();
  const Tensor labels = from_vector(kFiveLabels, {5});
  metrics.add(slice(logits, 0, 4), slice(labels, 0, 4), scalar_loss(1.0));
  metrics.add(slice(logits, 4, 5), slice(labels, 4, 5), scalar_loss(2.0));
  CHECK(names_of(metrics.logs()) == std::vector<std::string>{"loss"});
  CHECK(metrics.logs().at("loss") == doctest::Approx((4 * 1.0 + 1 * 2.0) / 5.0));
}

TEST_CASE("MetricAccumulator: logs are named after the metrics, loss first, with the given prefix") {
  MetricAccumulator metrics({Metric::mae, Metric::accuracy});
  const Tensor logits = five_logits();
  metrics.add(logits, logits, scalar_loss(0.5));
  CHECK(names_of(metrics.logs()) == std::vector<std::string>{"loss", "mae", "accuracy"});
  CHECK(names_of(metrics.logs("val_")) == std::vector<std::string>{"val_loss", "val_mae", "val_accuracy"});
  CHECK(metrics.logs("val_").at("val_loss") == doctest::Approx(0.5));
}

TEST_CASE("MetricAccumulator: reset forgets every batch added") {
  MetricAccumulator metrics({Metric::accuracy});
  metrics.add(five_logits(), from_vector(kFiveLabels, {5}), scalar_loss(3.0));
  metrics.reset();
  CHECK(metrics.samples() == 0.0);
  CHECK(metrics.sums() == std::vector<double>(4, 0.0));
}

TEST_CASE("MetricAccumulator: the sums of two accumulators added element-wise give the logs of their combined data") {
  // What a strategy does: each rank sums its shard, the sums are added over
  // ranks, and logs() then describes all samples.
  Generator generator(5);
  const Tensor outputs = normal({11, 3}, 0.0f, 1.0f, {}, &generator);
  const Tensor one_hot = from_vector(std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0,
                                                        1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0},
                                     {11, 3});
  const std::vector<Metric> kinds{Metric::accuracy, Metric::mae};
  MetricAccumulator rank0(kinds), rank1(kinds), combined(kinds);
  rank0.add(slice(outputs, 0, 4), slice(one_hot, 0, 4), scalar_loss(0.25));
  rank0.add(slice(outputs, 4, 5), slice(one_hot, 4, 5), scalar_loss(1.5));
  rank1.add(slice(outputs, 5, 11), slice(one_hot, 5, 11), scalar_loss(0.75));
  combined.add(slice(outputs, 0, 4), slice(one_hot, 0, 4), scalar_loss(0.25));
  combined.add(slice(outputs, 4, 5), slice(one_hot, 4, 5), scalar_loss(1.5));
  combined.add(slice(outputs, 5, 11), slice(one_hot, 5, 11), scalar_loss(0.75));

  REQUIRE(rank0.sums().size() == rank1.sums().size());
  for (std::size_t i = 0; i < rank0.sums().size(); ++i) rank0.sums()[i] += rank1.sums()[i];
  CHECK(rank0.samples() == 11.0);
  const optim::Logs summed = rank0.logs();
  const optim::Logs expected = combined.logs();
  REQUIRE(names_of(summed) == names_of(expected));
  for (const auto& [key, value] : expected) {
    const std::string name = key;
    CAPTURE(name);
    CHECK(summed.at(name) == doctest::Approx(value).epsilon(1e-12));
  }
}

TEST_CASE("MetricAccumulator: accuracy of outputs that are not one row of class scores per sample is an error naming the shapes") {
  MetricAccumulator metrics({Metric::accuracy});
  CHECK(throws_error_mentioning(
      [&] {
        metrics.add(from_vector({0.1f, 0.9f, 0.4f, 0.2f}, {4}), from_vector(std::vector<std::int64_t>{0, 1, 0, 1}, {4}),
                    scalar_loss(1.0));
      },
      {"accuracy", "[4]"}));
}

TEST_CASE("MetricAccumulator: accuracy with one-hot targets of another width is an error naming both shapes") {
  MetricAccumulator metrics({Metric::accuracy});
  CHECK(throws_error_mentioning(
      [&] {
        metrics.add(five_logits(), zeros({5, 4}), scalar_loss(1.0));
      },
      {"accuracy", "[5, 3]", "[5, 4]"}));
}

TEST_CASE("MetricAccumulator: mae of outputs and targets of different shapes is an error naming both shapes") {
  MetricAccumulator metrics({Metric::mae});
  CHECK(throws_error_mentioning(
      [&] {
        metrics.add(zeros({4, 3}), zeros({4, 2}), scalar_loss(1.0));
      },
      {"mae", "[4, 3]", "[4, 2]"}));
}

TEST_CASE("MetricAccumulator: accuracy of segmentation logits is each sample's fraction of correct pixels, averaged") {
  const std::vector<std::int32_t> labels32(kSegmentationLabels.begin(), kSegmentationLabels.end());
  std::vector<float> one_hot(24, 0.0f);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t p = 0; p < 4; ++p) one_hot[(n * 3 + static_cast<std::size_t>(kSegmentationLabels[n * 4 + p])) * 4 + p] = 1;
  for (const Tensor& targets : {from_vector(kSegmentationLabels, {2, 2, 2}), from_vector(labels32, {2, 2, 2}),
                                from_vector(one_hot, {2, 3, 2, 2})}) {
    MetricAccumulator metrics({Metric::accuracy});
    metrics.add(segmentation_logits(), targets, scalar_loss(1.0));
    CHECK(metrics.logs().at("accuracy") == doctest::Approx((2.0 / 4.0 + 3.0 / 4.0) / 2.0).epsilon(1e-15));
    CHECK(metrics.samples() == 2.0);
  }
}

TEST_CASE("MetricAccumulator: pixel accuracy and mean IoU of random segmentations over batches of awkward sizes equal a float64 count") {
  std::mt19937 rng(41);
  Generator generator(41);
  for (const auto& sizes : {std::array<std::int64_t, 4>{7, 3, 5, 13}, {5, 7, 1, 11}, {3, 2, 13, 7}}) {
    const std::int64_t samples = sizes[0], classes = sizes[1], height = sizes[2], width = sizes[3];
    CAPTURE(classes);
    const Tensor logits = test::uniform_tensor({samples, classes, height, width}, generator);
    std::uniform_int_distribution<std::int64_t> pick(0, classes - 1);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(samples * height * width));
    for (auto& label : labels) label = pick(rng);
    const ReferenceCounts counts = reference_counts(logits.to_vector<float>(), labels, samples, classes);
    double accuracy = 0.0, iou = 0.0, present = 0.0;
    for (const double a : counts.sample_accuracy) accuracy += a;
    for (std::int64_t c = 0; c < classes; ++c) {
      if (counts.union_of[c] == 0.0) continue;
      iou += counts.intersection[c] / counts.union_of[c];
      present += 1.0;
    }
    const Tensor targets = from_vector(labels, {samples, height, width});
    MetricAccumulator metrics({Metric::accuracy, Metric::mean_iou}, classes);
    // Batches of 1, 2, then the rest: sums, not means of batch means.
    for (const auto& [first, last] : {std::pair<std::int64_t, std::int64_t>{0, 1}, {1, 3}, {3, samples}}) {
      metrics.add(slice(logits, first, last), slice(targets, first, last), scalar_loss(1.0));
    }
    CHECK(metrics.logs().at("accuracy") == doctest::Approx(accuracy / static_cast<double>(samples)).epsilon(1e-12));
    CHECK(metrics.logs().at("mean_iou") == doctest::Approx(iou / present).epsilon(1e-12));
  }
}

TEST_CASE("MetricAccumulator: mean_iou averages intersection over union over the classes predicted or labelled") {
  // Predicted [[0, 1], [2, 2]] and [[1, 1], [0, 2]] against labels
  // [[0, 1], [1, 0]] and [[1, 1], [0, 1]]: class 0 is predicted or
  // labelled at 3 positions and both at 2, class 1 at 5 and 3, class 2 at 3
  // and none; a fourth class, neither predicted nor labelled, does not count.
  for (const std::int64_t extra : {0, 1}) {
    MetricAccumulator metrics({Metric::mean_iou}, 3 + extra);
    metrics.add(segmentation_logits(extra), from_vector(kSegmentationLabels, {2, 2, 2}), scalar_loss(1.0));
    CHECK(metrics.logs().at("mean_iou") == doctest::Approx((2.0 / 3.0 + 3.0 / 5.0 + 0.0) / 3.0).epsilon(1e-15));
    CHECK(metrics.sums().size() == 2 + 2 * static_cast<std::size_t>(3 + extra));
  }
}

TEST_CASE("MetricAccumulator: mean_iou sums of two ranks added element-wise give the mean IoU of all their data") {
  std::mt19937 rng(43);
  Generator generator(43);
  const Tensor logits = test::uniform_tensor({9, 5, 3, 7}, generator);
  std::uniform_int_distribution<std::int64_t> pick(0, 4);
  std::vector<std::int64_t> labels(9 * 3 * 7);
  for (auto& label : labels) label = pick(rng);
  const Tensor targets = from_vector(labels, {9, 3, 7});
  MetricAccumulator rank0({Metric::mean_iou}, 5), rank1({Metric::mean_iou}, 5), combined({Metric::mean_iou}, 5);
  rank0.add(slice(logits, 0, 4), slice(targets, 0, 4), scalar_loss(1.0));
  rank1.add(slice(logits, 4, 9), slice(targets, 4, 9), scalar_loss(1.0));
  combined.add(logits, targets, scalar_loss(1.0));
  for (std::size_t i = 0; i < rank0.sums().size(); ++i) rank0.sums()[i] += rank1.sums()[i];
  CHECK(rank0.logs().at("mean_iou") == doctest::Approx(combined.logs().at("mean_iou")).epsilon(1e-15));
}

TEST_CASE("MetricAccumulator: mean_iou without a class count, with outputs of another class count or with labels out of range is an error") {
  CHECK(throws_error_mentioning([] { MetricAccumulator metrics({Metric::mean_iou}); }, {"mean_iou", "classes"}));
  MetricAccumulator metrics({Metric::mean_iou}, 4);
  CHECK(throws_error_mentioning(
      [&] { metrics.add(segmentation_logits(), from_vector(kSegmentationLabels, {2, 2, 2}), scalar_loss(1.0)); },
      {"mean_iou", "[2, 3, 2, 2]", "4 class"}));
  std::vector<std::int64_t> labels = kSegmentationLabels;
  labels[6] = 3;
  MetricAccumulator three({Metric::mean_iou}, 3);
  CHECK(throws_error_mentioning(
      [&] { three.add(segmentation_logits(), from_vector(labels, {2, 2, 2}), scalar_loss(1.0)); },
      {"mean_iou", "label 3", "position 6", "3 classes"}));
}

TEST_CASE("MetricAccumulator: accuracy of segmentation logits with labels of another shape is an error naming both shapes") {
  MetricAccumulator metrics({Metric::accuracy});
  CHECK(throws_error_mentioning(
      [&] { metrics.add(segmentation_logits(), from_vector(kSegmentationLabels, {2, 4}), scalar_loss(1.0)); },
      {"accuracy", "[2, 3, 2, 2]", "[2, 2, 2]", "[2, 4]"}));
}

TEST_CASE("MetricAccumulator: metric_name and parse_metric are inverses") {
  for (const Metric metric : {Metric::accuracy, Metric::mae, Metric::mean_iou}) {
    CHECK(optim::parse_metric(optim::metric_name(metric)) == metric);
  }
  CHECK(optim::metric_name(Metric::accuracy) == "accuracy");
  CHECK(optim::metric_name(Metric::mae) == "mae");
}

TEST_CASE("MetricAccumulator: parse_metric of an unknown name is an error listing the known names") {
  CHECK(throws_error_mentioning([] { optim::parse_metric("acc"); }, {"'acc'", "accuracy", "mae", "mean_iou"}));
}

TEST_CASE("Logs: entries keep the order in which they were first set") {
  optim::Logs logs;
  logs.set("epoch", 1);
  logs.set("loss", 0.5);
  logs.set("accuracy", 0.75);
  logs.set("lr", 0.1);
  CHECK(names_of(logs) == std::vector<std::string>{"epoch", "loss", "accuracy", "lr"});
}

TEST_CASE("Logs: setting a present name overwrites its value in place") {
  optim::Logs logs;
  logs.set("loss", 0.5);
  logs.set("accuracy", 0.75);
  logs.set("loss", 0.25);
  CHECK(names_of(logs) == std::vector<std::string>{"loss", "accuracy"});
  CHECK(logs.at("loss") == 0.25);
  CHECK(logs.get("loss") == 0.25);
  CHECK(logs.contains("accuracy"));
  CHECK_FALSE(logs.contains("mae"));
  CHECK_FALSE(logs.get("mae").has_value());
}

TEST_CASE("Logs: at of a missing name is an error listing the names present") {
  optim::Logs logs;
  logs.set("epoch", 1);
  logs.set("loss", 0.5);
  CHECK(throws_error_mentioning([&] { logs.at("val_loss"); }, {"'val_loss'", "epoch, loss"}));
}

TEST_CASE("Logs: a History series holds each epoch's value and NaN where an epoch lacks the name") {
  optim::History history;
  history.epochs.resize(3);
  history.epochs[0].set("loss", 1.0);
  history.epochs[0].set("val_loss", 1.5);
  history.epochs[1].set("loss", 0.5);
  history.epochs[2].set("loss", 0.25);
  history.epochs[2].set("val_loss", 0.75);
  CHECK(history.series("loss") == std::vector<double>{1.0, 0.5, 0.25});
  const auto validation = history.series("val_loss");
  REQUIRE(validation.size() == 3);
  CHECK(validation[0] == 1.5);
  CHECK(std::isnan(validation[1]));
  CHECK(validation[2] == 0.75);
  CHECK(history.series("mae").size() == 3);
  CHECK(std::isnan(history.series("mae")[0]));
}

TEST_CASE("Logs: format_duration writes seconds, minutes:seconds or hours:minutes:seconds") {
  CHECK(optim::format_duration(37) == "37s");
  CHECK(optim::format_duration(0) == "0s");
  CHECK(optim::format_duration(59.4) == "59s");
  CHECK(optim::format_duration(59.6) == "1:00");
  CHECK(optim::format_duration(252) == "4:12");
  CHECK(optim::format_duration(3909) == "1:05:09");
  CHECK(optim::format_duration(-3) == "0s");
}

TEST_CASE("Logs: format_metrics writes the metrics with four decimals and leaves out the bookkeeping") {
  optim::Logs logs;
  logs.set("epoch", 3);
  logs.set("loss", 0.123456);
  logs.set("accuracy", 0.5);
  logs.set("lr", 0.01);
  logs.set("time_s", 2.5);
  logs.set("samples_per_s", 1000);
  logs.set("val_loss", 0.25);
  CHECK(optim::format_metrics(logs) == "loss: 0.1235 - accuracy: 0.5000 - val_loss: 0.2500");
}
