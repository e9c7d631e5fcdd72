// The pipeline's end-of-run report (parallel/strategies/pipeline/pipeline_report.cpp)
// on reports made up here: the measured bubble leaves the first step out
// (start-up, not the schedule), and names the busiest stage's idle share
// beside the stages' mean; and which batches pack their weights
// (PackWeights).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include <ddl/parallel/strategies/pipeline/pipeline.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_report.hpp>

using namespace ddl;
using namespace ddl::parallel;

namespace {

// A stage whose first step took `first` seconds, `first_compute` of them
// computing, and whose `steps - 1` later steps took `later` seconds in all,
// `later_compute` of them computing.
StageReport stage_report(int stage, std::int64_t steps, double first, double first_compute, double later,
                         double later_compute) {
  StageReport r;
  r.stage = stage;
  r.layers = {StageRange{static_cast<std::size_t>(2 * stage), static_cast<std::size_t>(2 * stage + 1)}};
  r.statistics.steps = steps;
  r.statistics.first_step_seconds = first;
  r.statistics.first_compute_seconds = first_compute;
  r.statistics.step_seconds = first + later;
  r.statistics.compute_seconds = first_compute + later_compute;
  r.statistics.peak_micro_batches = 1;
  return r;
}

}  // namespace

TEST_CASE("pipeline_report: the idle share leaves out the first step, unless it is the only one") {
  // First step 4 s, half idle; three more of 1 s each, a quarter idle.
  const StageReport r = stage_report(0, 4, 4.0, 2.0, 3.0, 2.25);
  CHECK(r.statistics.first_idle_fraction() == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(r.statistics.idle_fraction() == doctest::Approx(0.25).epsilon(1e-12));
  const StageReport alone = stage_report(0, 1, 4.0, 3.0, 0.0, 0.0);
  CHECK(alone.statistics.idle_fraction() == doctest::Approx(0.25).epsilon(1e-12));
  CHECK(PipelineStatistics{}.idle_fraction() == 0.0);  // no step yet: nothing idle, not NaN
}

TEST_CASE("pipeline_report: the bubble line gives the stages' mean, the busiest stage's and the first step's idle") {
  const PipelineOptions options{.micro_batches = 4, .schedule = PipelineSchedule::ZeroBubbleH2};
  // Stage 0 idle 10% after its first step (40% in it), stage 1 idle 30% (60%).
  const std::vector<StageReport> reports = {stage_report(0, 5, 2.0, 1.2, 8.0, 7.2),
                                            stage_report(1, 5, 2.0, 0.8, 8.0, 5.6)};
  const std::string table = format_stage_reports(reports, options);
  CAPTURE(table);
  CHECK(table.find("bubble: 20.0% of stage time idle after the first step, measured (the stages' mean; 10.0% on the "
                   "busiest stage; 50.0% in the first step); textbook 0 = 0.0% for p = 2, M = 4 (zb-h2)") !=
        std::string::npos);
  // Each stage's row shows its own idle share after the first step.
  CHECK(table.find(" 10.0% ") != std::string::npos);
  CHECK(table.find(" 30.0% ") != std::string::npos);

  const std::vector<StageReport> one_step = {stage_report(0, 1, 2.0, 1.5, 0.0, 0.0),
                                             stage_report(1, 1, 2.0, 1.0, 0.0, 0.0)};
  const std::string short_run = format_stage_reports(one_step, options);
  CAPTURE(short_run);
  CHECK(short_run.find("bubble: 37.5% of stage time idle, measured (the stages' mean; 25.0% on the busiest stage); ") !=
        std::string::npos);
}

TEST_CASE("pack_weights: auto packs from kPackFromMicroBatches micro-batches a batch on, on from 2, off never") {
  for (std::size_t m = 1; m <= 9; ++m) {
    CAPTURE(m);
    CHECK(packs_weights(PackWeights::Auto, m) == (m >= kPackFromMicroBatches));
    CHECK(packs_weights(PackWeights::On, m) == (m > 1));
    CHECK_FALSE(packs_weights(PackWeights::Off, m));
  }
  std::vector<std::string> names;
  for (const PackWeights mode : all_pack_weights()) names.emplace_back(pack_weights_name(mode));
  CHECK(names == std::vector<std::string>{"auto", "on", "off"});
}
