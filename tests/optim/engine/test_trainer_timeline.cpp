// The Trainer's phases on the timeline (core/timeline.hpp): every step holds
// its forward, backward and update, batches are fetched between steps,
// evaluation and checkpoints have their spans, and the per-layer option adds
// a span per layer and per backward node.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include <ddl/core/timeline.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/optim/engine/trainer.hpp>
#include <ddl/optim/sgd.hpp>

#include "engine_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "support/test_data.hpp"
#include "support/trace_checks.hpp"

using namespace ddl;

namespace {

// One epoch of 29 samples in batches of 8 (4 steps) with validation and a
// checkpoint, recorded.
timeline::Recording record_fit(bool per_layer) {
  const auto data = test::make_blobs(29, 3);
  auto model = test::make_classifier(5, /*dropout=*/false);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.1});
  optim::Trainer trainer(model, layers::cross_entropy, optimizer, test::quiet_options());
  test::TensorBatches batches(data.inputs, data.labels, 8);
  const test::TempDir directory("trainer_timeline");
  timeline::start({.per_layer = per_layer});
  trainer.fit(batches, {.epochs = 1, .validation = &batches});
  trainer.save_checkpoint(directory.file("last.ckpt"));
  return timeline::stop();
}

std::map<std::string, int> count_by_name(const timeline::Recording& recording) {
  std::map<std::string, int> counts;
  for (const timeline::Event& event : recording.events) ++counts[event.name];
  return counts;
}

}  // namespace

TEST_CASE("Trainer timeline: each step holds its forward, backward and update, data, evaluation and checkpoints too") {
  const timeline::Recording recording = record_fit(false);
  const auto counts = count_by_name(recording);
  CHECK(counts.at("epoch 1") == 1);
  CHECK(counts.at("step") == 4);
  CHECK(counts.at("forward") == 4);
  CHECK(counts.at("backward") == 4);
  CHECK(counts.at("update") == 4);
  CHECK(counts.at("next batch") == 5);  // the fifth finds the epoch's end
  CHECK(counts.at("evaluate") == 1);
  CHECK(counts.at("save checkpoint") == 1);
  CHECK_FALSE(counts.contains("0 Dense"));  // no per-layer spans unless asked

  // Steps are numbered, and hold their phases (the rest of the nesting is
  // checked on the file).
  std::vector<const timeline::Event*> steps;
  for (const timeline::Event& event : recording.events) {
    if (event.name == "step") steps.push_back(&event);
  }
  std::sort(steps.begin(), steps.end(), [](auto* a, auto* b) { return a->begin_ns < b->begin_ns; });
  for (std::size_t s = 0; s < steps.size(); ++s) {
    REQUIRE(steps[s]->args.size() == 1);
    CHECK(std::get<std::int64_t>(steps[s]->args[0].value) == static_cast<std::int64_t>(s));
    int phases = 0;
    for (const timeline::Event& event : recording.events) {
      const bool inside = event.begin_ns >= steps[s]->begin_ns && event.end_ns <= steps[s]->end_ns;
      if (inside && (event.name == "forward" || event.name == "backward" || event.name == "update")) ++phases;
    }
    CHECK(phases == 3);
  }
  const nlohmann::json trace =
      nlohmann::json::parse(timeline::chrome_trace_json({{.process = 0, .label = "trainer", .recording = recording}}));
  CHECK(test::trace_problems(trace, 1).empty());
}

TEST_CASE("Trainer timeline: per_layer adds a span per layer in forward and per autograd node in backward") {
  const timeline::Recording recording = record_fit(true);
  const auto counts = count_by_name(recording);
  // make_classifier: Dense, ReLU, Dense, each run by the 4 training steps
  // and the 4 evaluation batches.
  for (const char* layer : {"0 Dense", "1 ReLU", "2 Dense"}) {
    CAPTURE(layer);
    CHECK(counts.contains(layer));
    if (counts.contains(layer)) CHECK(counts.at(layer) == 4 + 4);
  }
  const bool backward_nodes = std::any_of(counts.begin(), counts.end(), [](const auto& entry) {
    return entry.first.ends_with("Backward") && entry.second >= 4;
  });
  CHECK(backward_nodes);
  CHECK(counts.at("AccumulateGrad") == 4 * 4);  // 4 parameters, 4 steps
  const nlohmann::json trace =
      nlohmann::json::parse(timeline::chrome_trace_json({{.process = 0, .label = "trainer", .recording = recording}}));
  CHECK(test::trace_problems(trace, 1).empty());
}
