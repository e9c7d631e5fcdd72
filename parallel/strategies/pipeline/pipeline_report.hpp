// What each pipeline stage holds and how busy it was: the end-of-run table
// of ddl-train --parallel pipeline, and the figures docs/PERFORMANCE.md
// records (per-stage memory, idle time against the textbook bubble).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/optim/optimizer.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline.hpp>

namespace ddl::parallel {

struct StageReport {
  int stage = 0;
  std::vector<StageRange> layers;  // one range per chunk
  double parameter_bytes = 0.0;
  double optimizer_bytes = 0.0;        // the optimizer's buffers (not its step counter)
  double peak_activation_bytes = 0.0;  // from the StepMemoryMonitor, 0 without one
  double peak_resident_bytes = 0.0;    // the process's peak resident set (getrusage), everything included
  double tensor_bytes = 0.0;           // with tensor groups: what this rank's group allreduces sent in training
  PipelineStatistics statistics;
};

// Collective over the pipeline's ranks: every stage's report, on every rank,
// in stage order. `memory` may be null.
std::vector<StageReport> gather_stage_reports(const Pipeline& pipeline, const layers::Module& stage_model,
                                              const optim::Optimizer& optimizer,
                                              const optim::StepMemoryMonitor* memory);

// The reports as a table, then the measured bubble (the stages' mean idle
// share of a step) beside the textbook (p - 1) / (M + p - 1).
std::string format_stage_reports(const std::vector<StageReport>& reports, const PipelineOptions& options);

}  // namespace ddl::parallel
