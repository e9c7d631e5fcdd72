// The small parsers of option strings and DDL_* variables, in one target:
// the first byte picks the parser, the rest is its text. Each returns a
// value or throws ddl::Error; a value it returns, printed by its own
// printer, parses to the same value, and the environment readers' numbers
// are positive (and finite).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <ddl/core/config.hpp>
#include <ddl/core/device.hpp>
#include <ddl/optim/engine/metrics.hpp>
#include <ddl/parallel/setup.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>
#include <ddl/parallel/strategies/pipeline/stage_split.hpp>

#include "support.hpp"

namespace {

// What the environment readers are given: a variable no one else reads.
constexpr const char* kVariable = "DDL_FUZZ_VALUE";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddl;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 6) {
    case 0: {  // --device, --placement's devices
      Device device;
      if (fuzz::parses([&] { device = Device::parse(text); })) {
        fuzz::require(Device::parse(device.str()) == device, "Device::parse(d.str()) == d");
      }
      break;
    }
    case 1: {  // --schedule and --parallel
      parallel::PipelineSchedule schedule{};
      if (fuzz::parses([&] { schedule = parallel::parse_pipeline_schedule(text); })) {
        fuzz::require(parallel::parse_pipeline_schedule(parallel::pipeline_schedule_name(schedule)) == schedule,
                      "parse_pipeline_schedule round trip");
      }
      parallel::StrategyKind kind{};
      if (fuzz::parses([&] { kind = parallel::parse_strategy_kind(text); })) {
        fuzz::require(parallel::parse_strategy_kind(parallel::strategy_kind_name(kind)) == kind,
                      "parse_strategy_kind round trip");
      }
      break;
    }
    case 2: {  // --balance and --overlap
      parallel::StageBalance balance{};
      if (fuzz::parses([&] { balance = parallel::parse_stage_balance(text); })) {
        fuzz::require(parallel::parse_stage_balance(parallel::stage_balance_name(balance)) == balance,
                      "parse_stage_balance round trip");
      }
      parallel::Overlap overlap{};
      if (fuzz::parses([&] { overlap = parallel::parse_overlap(text); })) {
        fuzz::require(parallel::parse_overlap(parallel::overlap_name(overlap)) == overlap, "parse_overlap round trip");
      }
      break;
    }
    case 3: {  // a Trainer's metrics by name
      optim::Metric metric{};
      if (fuzz::parses([&] { metric = optim::parse_metric(text); })) {
        fuzz::require(optim::parse_metric(optim::metric_name(metric)) == metric, "parse_metric round trip");
      }
      break;
    }
    case 4: {  // DDL_STALL_TIMEOUT and the other seconds (text up to its first NUL, as a variable holds it)
      setenv(kVariable, text.c_str(), 1);
      double value = 0;
      if (fuzz::parses([&] { value = config::positive_double_from_environment(kVariable, 1.0, 1e6); })) {
        fuzz::require(value > 0 && value <= 1e6, "positive_double_from_environment: positive, at most the maximum");
      }
      break;
    }
    case 5: {  // DDL_FUSION_THRESHOLD and the other byte counts
      setenv(kVariable, text.c_str(), 1);
      std::int64_t value = 0;
      if (fuzz::parses([&] { value = config::positive_bytes_from_environment(kVariable, 1); })) {
        fuzz::require(value > 0, "positive_bytes_from_environment: positive");
      }
      break;
    }
  }
  return 0;
}
