// Metrics the Trainer reports besides the loss:
// classification (or pixel) accuracy, mean absolute error, and a
// segmentation's mean intersection over union. They are accumulated as sums
// over the samples of an epoch, so a strategy can add up the sums of all
// ranks and every rank reports the same numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ddl/core/tensor.hpp>
#include <ddl/optim/engine/logs.hpp>

namespace ddl::optim {

enum class Metric {
  // Fraction of samples whose largest output is the target class. Outputs
  // [B, C]; targets int32/int64 labels [B] or float [B, C] one-hot rows.
  // Per-position outputs [B, C, d1, ..., dk] (a segmentation's logits) with
  // labels [B, d1, ..., dk] or one-hot targets shaped like the output: pixel
  // accuracy, each sample counting as its fraction of correct positions.
  accuracy,
  // Mean over all output elements of |output - target|, same shapes.
  mae,
  // Mean intersection over union of a segmentation (as PASCAL VOC scores
  // it): per class c, the positions predicted c and labelled c over those
  // predicted or labelled c, each summed over the epoch, then averaged over
  // the classes that occur in either. Outputs and targets as accuracy's;
  // needs the class count up front (MetricAccumulator's `classes`), as its
  // sums are two per class.
  mean_iou,
};

// "accuracy", "mae", "mean_iou".
std::string metric_name(Metric metric);
// The inverse of metric_name; throws ddl::Error listing the known names.
Metric parse_metric(const std::string& name);

class MetricAccumulator {
 public:
  // `classes`: the output's dim 1, needed by Metric::mean_iou alone.
  explicit MetricAccumulator(std::vector<Metric> metrics = {}, std::int64_t classes = 0);

  // Adds one batch: its output, its targets and its mean loss (a scalar).
  // Throws ddl::Error naming the shapes when a metric does not apply to them.
  // An undefined output adds nothing: a rank that computes no loss (a
  // parameter server, a pipeline stage before the last) reports none.
  void add(const Tensor& output, const Tensor& targets, const Tensor& loss);
  void reset();

  // "loss" and each metric by name, each prefixed by `prefix` ("val_").
  Logs logs(const std::string& prefix = "") const;
  double samples() const { return sums_[0]; }

  // The raw sums, laid out as [samples, loss · samples, then per metric its
  // sum and what that sum is divided by (mean_iou: per class its
  // intersection, then per class its union)], for a strategy to add up over
  // ranks in place before logs() is read.
  std::vector<double>& sums() { return sums_; }

 private:
  std::vector<Metric> metrics_;
  std::vector<std::size_t> offsets_;  // where each metric's sums start
  std::vector<double> sums_;
};

}  // namespace ddl::optim
