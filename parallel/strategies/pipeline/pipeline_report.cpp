// Per-stage reports of a pipeline (see pipeline_report.hpp).
#include <ddl/parallel/strategies/pipeline/pipeline_report.hpp>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/planning/placement.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>

namespace ddl::parallel {
namespace {

using optim::mebibytes;
using optim::peak_resident_bytes;

// A report travels as doubles, every field in a fixed place; its layers
// every rank knows already.
constexpr std::size_t kFields = 14;

std::array<double, kFields> encode(const StageReport& r) {
  const PipelineStatistics& s = r.statistics;
  return {static_cast<double>(r.stage),
          r.parameter_bytes,
          r.optimizer_bytes,
          r.peak_activation_bytes,
          r.peak_resident_bytes,
          static_cast<double>(s.steps),
          s.step_seconds,
          s.compute_seconds,
          static_cast<double>(s.messages),
          static_cast<double>(s.bytes),
          r.tensor_bytes,
          static_cast<double>(s.peak_packed_bytes),
          s.first_step_seconds,
          s.first_compute_seconds};
}

StageReport decode(const double* f, int peak_micro_batches, const Pipeline& pipeline) {
  StageReport r;
  r.stage = static_cast<int>(f[0]);
  r.layers = pipeline.layers_of(r.stage);
  r.parameter_bytes = f[1];
  r.optimizer_bytes = f[2];
  r.peak_activation_bytes = f[3];
  r.peak_resident_bytes = f[4];
  r.statistics.steps = static_cast<std::int64_t>(f[5]);
  r.statistics.step_seconds = f[6];
  r.statistics.compute_seconds = f[7];
  r.statistics.messages = static_cast<std::int64_t>(f[8]);
  r.statistics.bytes = static_cast<std::int64_t>(f[9]);
  r.tensor_bytes = f[10];
  r.statistics.peak_packed_bytes = static_cast<std::size_t>(f[11]);
  r.statistics.first_step_seconds = f[12];
  r.statistics.first_compute_seconds = f[13];
  r.statistics.peak_micro_batches = peak_micro_batches;
  return r;
}

// The most micro-batches (chunk-micro-batches) each rank's list holds at
// once, from the simulator: what the held column measures, beside it.
std::vector<int> schedule_peaks(const PipelineOptions& options, int ranks) {
  const PipelineSimulation run =
      simulate_pipeline(pipeline_actions(options.schedule, ranks, options.micro_batches, weight_gradients_of(options),
                                         options.chunks, options.schedule_costs),
                        options.schedule_costs, chunk_layout(options.schedule));
  std::vector<int> peaks;
  for (const StageSimulation& stage : run.stages) peaks.push_back(stage.peak_activations);
  return peaks;
}

}  // namespace

std::vector<std::shared_ptr<optim::Callback>> Pipeline::callbacks(const layers::Module& model) {
  if (!memory_) {
    const auto* stage = dynamic_cast<const layers::Sequential*>(&model);
    DDL_CHECK(stage != nullptr, "Pipeline: stage {} was given a {}, not a Sequential", this->stage(),
              model.type_name());
    memory_ = std::make_shared<optim::StepMemoryMonitor>(placement_devices(*stage));
  }
  return {memory_};
}

std::string Pipeline::report(const layers::Module& model, const optim::Optimizer& optimizer) {
  const auto reports = gather_stage_reports(*this, model, optimizer, memory_.get());
  std::string text = "pipeline stages (peaks over the training steps):\n" + format_stage_reports(reports, options());
  if (const auto group = tensor_group(); group && !group->counted()) {
    text += fmt::format("tensor groups of {} ranks ({}): their allreduces are {}'s own, uncounted\n", group->size(),
                        tensor_plan()->describe(), group->over_nccl() ? "NCCL" : "MPI");
  } else if (group) {
    text += fmt::format("tensor groups of {} ranks ({}), what each rank's allreduces sent per training step:",
                        group->size(), tensor_plan()->describe());
    for (const StageReport& r : reports) {
      const auto steps = static_cast<double>(std::max<std::int64_t>(1, r.statistics.steps));
      text += fmt::format(" stage {} {:.2f} MiB{}", r.stage, mebibytes(r.tensor_bytes / steps),
                          r.stage + 1 < static_cast<int>(reports.size()) ? "," : "\n");
    }
  }
  if (data_parallel() > 1) text += fmt::format("stage {}: {}", stage(), gradients().report(model, optimizer));
  return text;
}

std::vector<StageReport> gather_stage_reports(const Pipeline& pipeline, const layers::Module& stage_model,
                                              const optim::Optimizer& optimizer,
                                              const optim::StepMemoryMonitor* memory) {
  StageReport own;
  own.stage = pipeline.stage();
  own.layers = pipeline.layers();
  for (const Tensor& parameter : stage_model.parameters())
    own.parameter_bytes += static_cast<double>(parameter.nbytes());
  own.optimizer_bytes = static_cast<double>(optimizer.state_bytes());
  if (memory != nullptr) {
    for (const optim::StepMemory& peak : memory->peaks()) {
      own.peak_activation_bytes = std::max(own.peak_activation_bytes, static_cast<double>(peak.peak_activation_bytes));
    }
  }
  own.peak_resident_bytes = peak_resident_bytes();
  own.statistics = pipeline.statistics();
  own.tensor_bytes = static_cast<double>(pipeline.tensor_bytes_sent());

  std::array<double, kFields + 1> mine{};
  const auto fields = encode(own);
  std::copy(fields.begin(), fields.end(), mine.begin());
  mine[kFields] = static_cast<double>(own.statistics.peak_micro_batches);
  const std::vector<double> values = allgather_values(pipeline.communicator(), std::span<const double>(mine));
  std::vector<StageReport> reports;
  for (std::size_t offset = 0; offset < values.size(); offset += kFields + 1) {
    reports.push_back(decode(values.data() + offset, static_cast<int>(values[offset + kFields]), pipeline));
  }
  return reports;
}

std::string format_stage_reports(const std::vector<StageReport>& reports, const PipelineOptions& options) {
  // As wide as the longest list of a rank's layers ("0-3,8-11" with chunks).
  std::size_t width = 8;
  for (const StageReport& r : reports) width = std::max(width, format_ranges(r.layers).size());
  std::string out = fmt::format("{:<6} {:<{}} {:>11} {:>10} {:>11} {:>13} {:>9} {:>6} {:>13} {:>14}\n", "stage",
                                "layers", width, "params MiB", "optim MiB", "activ. MiB", "held (sched.)", "peak RSS",
                                "idle", "messages/step", "sent/step MiB");
  const auto stages = static_cast<int>(reports.size());
  const std::vector<int> peaks = stages > 0 ? schedule_peaks(options, stages) : std::vector<int>();
  // The stages' mean idle share beside the busiest stage's: the step waits
  // for the busiest, so its idle time is the bubble that costs time; the
  // others' idle beyond it is the stages' imbalance (what --balance moves).
  double idle = 0.0;
  double first_idle = 0.0;
  double busiest_idle = 1.0;
  std::int64_t most_steps = 0;
  for (const StageReport& r : reports) {
    idle += r.statistics.idle_fraction();
    first_idle += r.statistics.first_idle_fraction();
    busiest_idle = std::min(busiest_idle, r.statistics.idle_fraction());
    most_steps = std::max(most_steps, r.statistics.steps);
    // Per training step, as data and tensor parallelism report theirs.
    const auto steps = static_cast<double>(std::max<std::int64_t>(1, r.statistics.steps));
    const std::string held =
        fmt::format("{} ({})", r.statistics.peak_micro_batches, peaks[static_cast<std::size_t>(r.stage)]);
    out +=
        fmt::format("{:<6} {:<{}} {:>11.2f} {:>10.2f} {:>11.2f} {:>13} {:>8.0f}M {:>5.1f}% {:>13g} {:>14.2f}\n",
                    r.stage, format_ranges(r.layers), width, mebibytes(r.parameter_bytes), mebibytes(r.optimizer_bytes),
                    mebibytes(r.peak_activation_bytes), held, mebibytes(r.peak_resident_bytes),
                    100.0 * r.statistics.idle_fraction(), static_cast<double>(r.statistics.messages) / steps,
                    mebibytes(static_cast<double>(r.statistics.bytes) / steps));
  }
  const auto mean = [&](double sum) { return reports.empty() ? 0.0 : 100.0 * sum / stages; };
  out += fmt::format(
      "bubble: {:.1f}% of stage time idle{}, measured (the stages' mean; {:.1f}% on the busiest stage{}); "
      "textbook {} = {:.1f}% for p = {}, M = {} ({}{})\n",
      mean(idle), most_steps > 1 ? " after the first step" : "", reports.empty() ? 0.0 : 100.0 * busiest_idle,
      most_steps > 1 ? fmt::format("; {:.1f}% in the first step", mean(first_idle)) : std::string(),
      schedule_bubble_formula(options.schedule, stages, options.micro_batches, options.chunks),
      100.0 * schedule_bubble_fraction(options.schedule, stages, options.micro_batches, options.chunks), stages,
      options.micro_batches, pipeline_schedule_name(options.schedule),
      options.chunks > 1 ? fmt::format(", v = {} chunks per rank", options.chunks) : std::string());
  const bool packed = std::any_of(reports.begin(), reports.end(),
                                  [](const StageReport& r) { return r.statistics.peak_packed_bytes > 0; });
  if (packed) {
    out += "weights packed once per batch (--pack-weights), MiB held during a step:";
    for (const StageReport& r : reports) {
      out += fmt::format(" stage {} {:.2f}{}", r.stage, mebibytes(static_cast<double>(r.statistics.peak_packed_bytes)),
                         r.stage + 1 < stages ? "," : "\n");
    }
  }
  return out;
}

}  // namespace ddl::parallel
