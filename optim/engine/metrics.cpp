// Metric accumulation (see metrics.hpp). Per batch only a few numbers reach
// the host: the loss, the arg-max of each output row or position (and the
// labels), or one summed |error|.
#include <ddl/optim/engine/metrics.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>

namespace ddl::optim {
namespace {

constexpr std::size_t kSamples = 0;
constexpr std::size_t kLoss = 1;
constexpr std::size_t kFirstMetric = 2;

// A batch's predicted and labelled class at every position, on the host:
// outputs [B, C] or [B, C, d1, ..., dk] and targets int32/int64 labels
// [B, d1, ..., dk] or one-hot float32 shaped like the output.
struct Classified {
  std::vector<std::int64_t> predicted, labels;
  std::size_t positions;  // per sample: d1 · ... · dk (1 for [B, C])
};

Classified classify(const Tensor& output, const Tensor& targets, const char* metric) {
  std::vector<std::int64_t> dims = output.shape().to_vector();
  const auto positions = std::accumulate(dims.begin() + std::min<std::size_t>(dims.size(), 2), dims.end(),
                                         std::int64_t{1}, std::multiplies<>());
  DDL_CHECK(output.dim() >= 2 && output.size(1) > 0 && positions > 0 && targets.defined(),
            "{}: needs outputs [B, C] or [B, C, d1, ..., dk] with C, d1, ..., dk > 0 and their targets, got outputs {} "
            "and targets {}",
            metric, output.shape(), targets.defined() ? targets.shape() : Shape{});
  dims.erase(dims.begin() + 1);
  const Shape per_position(dims);
  const Tensor host = targets.to(cpu());
  Classified result{ddl::argmax(output, 1).to(cpu()).to_vector<std::int64_t>(), {}, static_cast<std::size_t>(positions)};
  if (host.dtype() == DType::Int64 && host.shape() == per_position) {
    result.labels = host.to_vector<std::int64_t>();
  } else if (host.dtype() == DType::Int32 && host.shape() == per_position) {
    const auto labels = host.to_vector<std::int32_t>();
    result.labels.assign(labels.begin(), labels.end());
  } else {
    DDL_CHECK(host.dtype() == DType::Float32 && host.shape() == output.shape(),
              "{}: targets must be integer labels {} or one-hot targets shaped like the output {}, got {} {}", metric,
              per_position, output.shape(), host.dtype(), host.shape());
    result.labels = ddl::argmax(host, 1).to_vector<std::int64_t>();
  }
  return result;
}

// (sum over samples of each one's fraction of correct positions, samples) of
// one batch: for [B, C] outputs, the correct predictions.
std::pair<double, double> accuracy_sums(const Tensor& output, const Tensor& targets) {
  const Classified batch = classify(output, targets, "accuracy");
  double sum = 0.0;
  for (std::size_t first = 0; first < batch.predicted.size(); first += batch.positions) {
    std::size_t correct = 0;
    for (std::size_t i = first; i < first + batch.positions; ++i) correct += batch.predicted[i] == batch.labels[i];
    sum += static_cast<double>(correct) / static_cast<double>(batch.positions);
  }
  return {sum, static_cast<double>(output.size(0))};
}

// Adds a batch's per-class intersections and unions to `sums` (2 · classes).
void add_overlap_sums(const Tensor& output, const Tensor& targets, std::span<double> sums) {
  const auto classes = static_cast<std::int64_t>(sums.size() / 2);
  DDL_CHECK(output.dim() >= 2 && output.size(1) == classes,
            "mean_iou: outputs {} do not hold the {} class scores it was set up for along dim 1", output.shape(),
            classes);
  const Classified batch = classify(output, targets, "mean_iou");
  for (std::size_t i = 0; i < batch.labels.size(); ++i) {
    const std::int64_t predicted = batch.predicted[i], label = batch.labels[i];
    DDL_CHECK(label >= 0 && label < classes, "mean_iou: label {} at position {} is out of range for {} classes",
              label, i, classes);
    if (predicted == label) {
      sums[static_cast<std::size_t>(label)] += 1.0;
      sums[static_cast<std::size_t>(classes + label)] += 1.0;
    } else {
      sums[static_cast<std::size_t>(classes + predicted)] += 1.0;
      sums[static_cast<std::size_t>(classes + label)] += 1.0;
    }
  }
}

double mean_iou_of(std::span<const double> sums) {
  const std::size_t classes = sums.size() / 2;
  double total = 0.0, present = 0.0;
  for (std::size_t c = 0; c < classes; ++c) {
    if (sums[classes + c] == 0.0) continue;  // neither predicted nor labelled: no score
    total += sums[c] / sums[classes + c];
    present += 1.0;
  }
  return present > 0.0 ? total / present : 0.0;
}

// (sum of |output - target|, elements) of one batch.
std::pair<double, double> absolute_error_sums(const Tensor& output, const Tensor& targets) {
  DDL_CHECK(targets.dtype() == DType::Float32 && targets.shape() == output.shape(),
            "mae: targets must be float32 shaped like the output {}, got {} {}", output.shape(), targets.dtype(),
            targets.shape());
  const double total = ddl::sum(ddl::abs(output - targets)).to(cpu()).item();
  return {total, static_cast<double>(output.numel())};
}

}  // namespace

std::string metric_name(Metric metric) {
  switch (metric) {
    case Metric::accuracy: return "accuracy";
    case Metric::mae: return "mae";
    case Metric::mean_iou: return "mean_iou";
  }
  return "unknown";
}

Metric parse_metric(const std::string& name) {
  for (const Metric metric : {Metric::accuracy, Metric::mae, Metric::mean_iou}) {
    if (metric_name(metric) == name) return metric;
  }
  throw Error(fmt::format("unknown metric '{}'; known metrics: accuracy, mae, mean_iou", name));
}

MetricAccumulator::MetricAccumulator(std::vector<Metric> metrics, std::int64_t classes)
    : metrics_(std::move(metrics)) {
  std::size_t next = kFirstMetric;
  for (const Metric metric : metrics_) {
    DDL_CHECK(metric != Metric::mean_iou || classes > 0,
              "mean_iou needs the number of classes (the output's dim 1), got {}", classes);
    offsets_.push_back(next);
    next += metric == Metric::mean_iou ? 2 * static_cast<std::size_t>(classes) : 2;
  }
  offsets_.push_back(next);
  reset();
}

void MetricAccumulator::reset() { sums_.assign(offsets_.back(), 0.0); }

void MetricAccumulator::add(const Tensor& output, const Tensor& targets, const Tensor& loss) {
  if (!output.defined()) return;
  const NoGradGuard no_grad;
  const Tensor detached = output.detach();
  const double batch = static_cast<double>(detached.size(0));
  sums_[kSamples] += batch;
  sums_[kLoss] += static_cast<double>(loss.detach().to(cpu()).item()) * batch;
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    const std::span<double> slots(sums_.data() + offsets_[m], offsets_[m + 1] - offsets_[m]);
    if (metrics_[m] == Metric::mean_iou) {
      add_overlap_sums(detached, targets, slots);
      continue;
    }
    const auto [sum, count] = metrics_[m] == Metric::accuracy ? accuracy_sums(detached, targets)
                                                              : absolute_error_sums(detached, targets);
    slots[0] += sum;
    slots[1] += count;
  }
}

Logs MetricAccumulator::logs(const std::string& prefix) const {
  Logs logs;
  const auto mean = [](double sum, double count) { return count > 0.0 ? sum / count : 0.0; };
  logs.set(prefix + "loss", mean(sums_[kLoss], sums_[kSamples]));
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    const std::span<const double> slots(sums_.data() + offsets_[m], offsets_[m + 1] - offsets_[m]);
    logs.set(prefix + metric_name(metrics_[m]),
             metrics_[m] == Metric::mean_iou ? mean_iou_of(slots) : mean(slots[0], slots[1]));
  }
  return logs;
}

}  // namespace ddl::optim
