// Metric accumulation (see metrics.hpp). Per batch only a few numbers reach
// the host: the loss, the arg-max of each output row, or one summed |error|.
#include <ddl/optim/engine/metrics.hpp>

#include <cstdint>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>

namespace ddl::optim {
namespace {

constexpr std::size_t kSamples = 0;
constexpr std::size_t kLoss = 1;
constexpr std::size_t kFirstMetric = 2;

// Class labels as int64 on the host, from int labels [B] or one-hot rows [B, C].
std::vector<std::int64_t> labels_of(const Tensor& targets, const Shape& output_shape) {
  const Tensor host = targets.to(cpu());
  if (host.dtype() == DType::Int64 && host.dim() == 1) return host.to_vector<std::int64_t>();
  if (host.dtype() == DType::Int32 && host.dim() == 1) {
    const auto labels = host.to_vector<std::int32_t>();
    return {labels.begin(), labels.end()};
  }
  DDL_CHECK(host.dtype() == DType::Float32 && host.shape() == output_shape,
            "accuracy: targets must be integer labels [B] or one-hot rows shaped like the output {}, got {} {}",
            output_shape, host.dtype(), host.shape());
  return ddl::argmax(host, 1).to_vector<std::int64_t>();
}

// (correct predictions, samples) of one batch.
std::pair<double, double> accuracy_sums(const Tensor& output, const Tensor& targets) {
  DDL_CHECK(output.dim() == 2 && targets.defined() && targets.dim() >= 1 && targets.size(0) == output.size(0),
            "accuracy: needs outputs [B, C] and targets with B rows, got outputs {} and targets {}", output.shape(),
            targets.shape());
  const auto predicted = ddl::argmax(output, 1).to(cpu()).to_vector<std::int64_t>();
  const auto labels = labels_of(targets, output.shape());
  double correct = 0.0;
  for (std::size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == labels[i] ? 1.0 : 0.0;
  return {correct, static_cast<double>(predicted.size())};
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
  }
  return "unknown";
}

Metric parse_metric(const std::string& name) {
  for (const Metric metric : {Metric::accuracy, Metric::mae}) {
    if (metric_name(metric) == name) return metric;
  }
  throw Error(fmt::format("unknown metric '{}'; known metrics: accuracy, mae", name));
}

MetricAccumulator::MetricAccumulator(std::vector<Metric> metrics) : metrics_(std::move(metrics)) { reset(); }

void MetricAccumulator::reset() { sums_.assign(kFirstMetric + 2 * metrics_.size(), 0.0); }

void MetricAccumulator::add(const Tensor& output, const Tensor& targets, const Tensor& loss) {
  if (!output.defined()) return;
  const NoGradGuard no_grad;
  const Tensor detached = output.detach();
  const double batch = static_cast<double>(detached.size(0));
  sums_[kSamples] += batch;
  sums_[kLoss] += static_cast<double>(loss.detach().to(cpu()).item()) * batch;
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    const auto [sum, count] = metrics_[m] == Metric::accuracy ? accuracy_sums(detached, targets)
                                                              : absolute_error_sums(detached, targets);
    sums_[kFirstMetric + 2 * m] += sum;
    sums_[kFirstMetric + 2 * m + 1] += count;
  }
}

Logs MetricAccumulator::logs(const std::string& prefix) const {
  Logs logs;
  const auto mean = [](double sum, double count) { return count > 0.0 ? sum / count : 0.0; };
  logs.set(prefix + "loss", mean(sums_[kLoss], sums_[kSamples]));
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    logs.set(prefix + metric_name(metrics_[m]), mean(sums_[kFirstMetric + 2 * m], sums_[kFirstMetric + 2 * m + 1]));
  }
  return logs;
}

}  // namespace ddl::optim
