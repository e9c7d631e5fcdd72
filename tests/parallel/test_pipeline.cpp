// The pipeline strategy (parallel/strategies/pipeline/pipeline.hpp) over all the ranks, one
// stage each (2, 3 and 4 under ctest): training equals one process at the
// same batch for both schedules and any micro-batch count, evaluation and
// prediction too, and checkpoints are the single-process format, resumable
// on another stage count or in one process.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <ddl/ddl.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

namespace ddl::test {
namespace {

using parallel::Communicator;
using parallel::PackWeights;
using parallel::Pipeline;
using parallel::PipelineOptions;
using parallel::PipelineSchedule;

constexpr std::uint64_t kSeed = 9;

std::shared_ptr<optim::Optimizer> sgd(std::vector<Tensor> parameters) {
  return std::make_shared<optim::SGD>(std::move(parameters), optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
}

struct Run {
  std::shared_ptr<layers::Sequential> model;
  std::shared_ptr<Pipeline> pipeline;  // null: one process
  std::unique_ptr<optim::Trainer> trainer;
};

// One stage per rank of `comm` (and chunk, under a schedule of several
// chunks per rank), the layers split evenly, on `device`.
Run pipeline_run(const Communicator& comm, PipelineOptions options, const MakeOptimizer& make = sgd,
                 const Device& device = cpu(), const layers::LayerList& list = small_cnn_layers()) {
  Run run;
  const int stages = comm.size() * parallel::chunks_per_rank(options.schedule, options.chunks);
  run.pipeline = std::make_shared<Pipeline>(
      comm, parallel::balanced_split(std::vector<double>(list.size(), 1.0), stages), options);
  Generator generator(kSeed);
  run.model = parallel::build_stage(list, *run.pipeline, &generator);
  run.model->to(device);
  run.trainer = std::make_unique<optim::Trainer>(run.model, layers::cross_entropy, make(run.model->parameters()),
                                                 quiet_options({optim::Metric::accuracy}, run.pipeline));
  return run;
}

Run single_run(const MakeOptimizer& make = sgd) {
  Run run;
  Generator generator(kSeed);
  run.model = small_cnn_layers().build(&generator);
  run.trainer = std::make_unique<optim::Trainer>(run.model, layers::cross_entropy, make(run.model->parameters()),
                                                 quiet_options({optim::Metric::accuracy}));
  return run;
}

models::DataLoader training_data(const Device& device = cpu()) {
  return models::DataLoader(random_images(),
                            {.batch_size = kGlobalBatch, .shuffle = true, .seed = 3, .device = device});
}

// The largest relative difference between the stage's parameters and the
// same-named ones of a whole model.
double stage_difference(const layers::Module& stage, const layers::Module& whole) {
  const auto reference = whole.named_parameters();
  double worst = 0.0;
  for (const auto& entry : stage.named_parameters()) {
    const auto& name = entry.first;
    const auto& tensor = entry.second;
    const auto same = std::find_if(reference.begin(), reference.end(), [&](const auto& e) { return e.first == name; });
    REQUIRE_MESSAGE(same != reference.end(), name);
    worst = std::max(worst, max_relative_difference(tensor.to_vector<float>(), same->second.to_vector<float>()));
  }
  return worst;
}

}  // namespace

TEST_CASE("Pipeline: training equals one process at the same batch, for both schedules and any micro-batch count") {
  const Communicator world = Communicator::world();
  Run single = single_run();
  auto data = training_data();
  single.trainer->fit(data, {.epochs = 2});

  // 12 samples per batch: 5 micro-batches are uneven (3, 3, 2, 2, 2), and 16
  // are more than the samples (one each).
  for (const int micro_batches : {1, 2, 4, 5, 16}) {
    std::vector<std::vector<float>> by_schedule;
    for (const PipelineSchedule schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
      CAPTURE(micro_batches);
      CAPTURE(parallel::pipeline_schedule_name(schedule));
      Run run = pipeline_run(world, {.micro_batches = micro_batches, .schedule = schedule});
      run.trainer->fit(data, {.epochs = 2});
      const double difference = stage_difference(*run.model, *single.model);
      CHECK(difference <= (micro_batches == 1 ? 1e-6 : 1e-5));
      by_schedule.push_back(flat_parameters(*run.model));
      const parallel::PipelineStatistics statistics = run.pipeline->statistics();
      CHECK(statistics.steps == 8);
      // 1F1B holds at most (stages - stage) micro-batches' activations.
      const int micro = std::min(micro_batches, static_cast<int>(kGlobalBatch));
      CHECK(statistics.peak_micro_batches ==
            (schedule == PipelineSchedule::GPipe ? micro : std::min(micro, world.size() - world.rank())));
    }
    // Both schedules sum each gradient over the micro-batches in one order.
    CHECK(by_schedule[0] == by_schedule[1]);
  }
}

TEST_CASE("Pipeline: Dense weight gradients deferred to the batch's end train as computed per micro-batch") {
  const Communicator world = Communicator::world();
  Run single = single_run();
  auto data = training_data();
  single.trainer->fit(data, {.epochs = 2});

  // The rows each deferred weight keeps by the last backward: the whole
  // batch's inputs and output gradients of every Dense layer of the stage.
  // Per micro-batch, those of the largest micro-batch (3 of the 12 rows),
  // and of the convolution too (its 1x12x12 input and 4x10x10 output
  // images), whose W then also waits for its own action.
  std::size_t dense_rows_bytes = 0, micro_batch_rows_bytes = 0;
  for (const auto& entry : pipeline_run(world, {}).model->named_parameters()) {
    const Tensor& parameter = entry.second;
    if (parameter.dim() < 2) continue;
    const bool dense = parameter.dim() == 2;
    const std::int64_t per_sample = dense ? parameter.size(0) + parameter.size(1) : 144 + 400;
    if (dense) dense_rows_bytes += static_cast<std::size_t>(kGlobalBatch * per_sample) * sizeof(float);
    micro_batch_rows_bytes += static_cast<std::size_t>(3 * per_sample) * sizeof(float);
  }
  for (const PipelineSchedule schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
    CAPTURE(parallel::pipeline_schedule_name(schedule));
    std::vector<std::vector<float>> by_mode;
    for (const bool deferred : {true, false}) {
      CAPTURE(deferred);
      Run run = pipeline_run(world, {.micro_batches = 5, .schedule = schedule, .defer_weight_gradients = deferred});
      run.trainer->fit(data, {.epochs = 2});
      CHECK(stage_difference(*run.model, *single.model) <= 1e-5);
      CHECK(run.pipeline->statistics().peak_deferred_bytes == (deferred ? dense_rows_bytes : micro_batch_rows_bytes));
      by_mode.push_back(flat_parameters(*run.model));
    }
    // The sums run in another order (one product over 12 rows against five
    // over 2 or 3), so they differ by rounding, but not beyond.
    CHECK(max_relative_difference(by_mode[0], by_mode[1]) <= 1e-5);
  }
}

TEST_CASE("Pipeline: weights packed once per batch train as weights packed by every product") {
  const Communicator world = Communicator::world();
  Run single = single_run();
  auto data = training_data();
  single.trainer->fit(data, {.epochs = 2});

  std::vector<std::vector<float>> by_mode;
  std::size_t packed_bytes = 0, dense_bytes = 0;
  for (const PackWeights pack : {PackWeights::On, PackWeights::Off}) {
    CAPTURE(parallel::pack_weights_name(pack));
    Run run = pipeline_run(world, {.micro_batches = 5, .pack_weights = pack});
    run.trainer->fit(data, {.epochs = 2});
    CHECK(stage_difference(*run.model, *single.model) <= 1e-5);
    by_mode.push_back(flat_parameters(*run.model));
    if (pack == PackWeights::Off) {
      CHECK(run.pipeline->statistics().peak_packed_bytes == 0);
      continue;
    }
    packed_bytes = run.pipeline->statistics().peak_packed_bytes;
    for (const Tensor& parameter : run.model->parameters()) {
      if (parameter.dim() == 2) dense_bytes += parameter.nbytes();
    }
  }
  // Other kernels sum in other orders: rounding apart, no more.
  CHECK(max_relative_difference(by_mode[0], by_mode[1]) <= 1e-5);
  if (dense_bytes == 0) {
    CHECK(packed_bytes == 0);  // a stage of convolutions alone has no weight to pack
  } else if (packed_bytes == 0) {
    test::skip("oneDNN reads the Dense weights plain on this CPU (no AVX-512 brgemm): nothing was packed");
  } else {
    CHECK(packed_bytes >= 2 * dense_bytes);  // forward and transposed, each at least the weight's bytes
  }
}

TEST_CASE("Pipeline: zb-h1 and zb-h2 train bit for bit as gpipe and 1f1b with weight gradients per micro-batch") {
  const Communicator world = Communicator::world();
  Run single = single_run();
  auto data = training_data();
  single.trainer->fit(data, {.epochs = 2});
  for (const int micro_batches : {1, 2, 3, 5, 8}) {
    CAPTURE(micro_batches);
    // Right after each backward (gpipe, 1f1b) or where the schedule places
    // each micro-batch's own product (zb-h1, zb-h2): one sum, in one order.
    std::vector<std::vector<float>> by_schedule;
    for (const PipelineSchedule schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB,
                                            PipelineSchedule::ZeroBubbleH1, PipelineSchedule::ZeroBubbleH2}) {
      CAPTURE(parallel::pipeline_schedule_name(schedule));
      Run run =
          pipeline_run(world, {.micro_batches = micro_batches, .schedule = schedule, .defer_weight_gradients = false});
      run.trainer->fit(data, {.epochs = 2});
      CHECK(stage_difference(*run.model, *single.model) <= (micro_batches == 1 ? 1e-6 : 1e-5));
      by_schedule.push_back(flat_parameters(*run.model));
      // zb-h1 holds 1f1b's activations, zb-h2 twice as many.
      const int downstream = world.size() - world.rank() - 1;
      const int held = schedule == PipelineSchedule::GPipe          ? micro_batches
                       : schedule == PipelineSchedule::ZeroBubbleH2 ? std::min(micro_batches, 2 * downstream + 1)
                                                                    : std::min(micro_batches, downstream + 1);
      CHECK(run.pipeline->statistics().peak_micro_batches == held);
    }
    for (std::size_t i = 1; i < by_schedule.size(); ++i) CHECK(by_schedule[i] == by_schedule[0]);
  }
}

// 12 layers: enough for 4 ranks x 3 chunks.
layers::LayerList deep_mlp_layers() {
  layers::LayerList list;
  list.emplace<layers::Flatten>().emplace_init<layers::Dense>(144, 24, true).emplace<layers::Tanh>();
  for (int i = 0; i < 3; ++i) list.emplace_init<layers::Dense>(24, 24, true).emplace<layers::ReLU>();
  list.emplace_init<layers::Dense>(24, 16, true).emplace<layers::Tanh>().emplace_init<layers::Dense>(16, 10, true);
  return list;
}

// Each parameter of `run`'s stage equals the same-named one of `reference`
// (which holds the whole model) bit for bit.
void check_same_bits(const layers::Module& stage, const layers::Module& reference) {
  const auto whole = reference.named_parameters();
  for (const auto& entry : stage.named_parameters()) {
    const std::string& name = entry.first;
    const auto same = std::find_if(whole.begin(), whole.end(), [&](const auto& e) { return e.first == name; });
    REQUIRE_MESSAGE(same != whole.end(), name);
    CHECK_MESSAGE(entry.second.to_vector<float>() == same->second.to_vector<float>(), name);
  }
}

TEST_CASE("Pipeline: interleaved-1f1b and zb-v, several chunks per rank, train bit for bit as one stage would") {
  const Communicator world = Communicator::world();
  const layers::LayerList list = deep_mlp_layers();
  auto data = training_data();
  for (const int micro_batches : {1, 2, 3, 5, 8}) {
    CAPTURE(micro_batches);
    // The same micro-batches through the whole model on each rank alone:
    // every layer computes what it computes in any stage.
    manual_seed(kSeed);
    Run alone = pipeline_run(world.split(world.rank(), 0),
                             {.micro_batches = micro_batches, .defer_weight_gradients = false}, sgd, cpu(), list);
    alone.trainer->fit(data, {.epochs = 2});
    for (const auto& config :
         {std::pair{PipelineSchedule::Interleaved1F1B, 2}, std::pair{PipelineSchedule::Interleaved1F1B, 3},
          std::pair{PipelineSchedule::ZeroBubbleV, 2}}) {
      const PipelineSchedule schedule = config.first;
      const int chunks = config.second;
      CAPTURE(parallel::pipeline_schedule_name(schedule));
      CAPTURE(chunks);
      manual_seed(kSeed);
      Run run = pipeline_run(
          world,
          {.micro_batches = micro_batches, .schedule = schedule, .chunks = chunks, .defer_weight_gradients = false},
          sgd, cpu(), list);
      REQUIRE(run.pipeline->layers().size() == static_cast<std::size_t>(chunks));
      run.trainer->fit(data, {.epochs = 2});
      check_same_bits(*run.model, *alone.model);
      CHECK(run.pipeline->statistics().messages > 0);
    }
    // zb-v's lists ordered by unequal chunk times (what --balance time
    // gives it): other lists, the same bits. The first of some seeded
    // random times whose lists differ from the unit ones (zb-v keeps the
    // unit lists where the timed ones would not be faster).
    const auto lists = [&](const parallel::PipelineCosts& costs) {
      return parallel::pipeline_actions(PipelineSchedule::ZeroBubbleV, world.size(), micro_batches,
                                        parallel::WeightGradients::per_micro_batch, 2, costs);
    };
    std::mt19937 random(23);
    std::uniform_real_distribution<double> time(0.5, 3.0);
    parallel::PipelineCosts uneven;
    for (int attempt = 0; attempt < 50 && (attempt == 0 || lists(uneven) == lists({})); ++attempt) {
      uneven = {};
      for (int stage = 0; stage < 2 * world.size(); ++stage) {
        uneven.forward_per_stage.push_back(time(random));
        uneven.backward_per_stage.push_back(time(random));
        uneven.weight_per_stage.push_back(time(random));
      }
    }
    if (micro_batches >= 5) CHECK(lists(uneven) != lists({}));
    manual_seed(kSeed);
    Run timed = pipeline_run(world,
                             {.micro_batches = micro_batches,
                              .schedule = PipelineSchedule::ZeroBubbleV,
                              .chunks = 2,
                              .schedule_costs = uneven,
                              .defer_weight_gradients = false},
                             sgd, cpu(), list);
    timed.trainer->fit(data, {.epochs = 2});
    check_same_bits(*timed.model, *alone.model);
  }
}

TEST_CASE("Pipeline: stages that recompute their activations train bit for bit as stages that keep them") {
  const Communicator world = Communicator::world();
  // Dropout draws masks and BatchNorm updates running statistics in every
  // forward: the recomputing forward must draw the same and leave the same.
  const layers::LayerList list = stateful_cnn_layers();
  auto data = training_data();
  for (const PipelineSchedule schedule : {PipelineSchedule::GPipe, PipelineSchedule::ZeroBubbleH1}) {
    for (const int micro_batches : {1, 3}) {
      CAPTURE(parallel::pipeline_schedule_name(schedule));
      CAPTURE(micro_batches);
      std::vector<std::vector<std::vector<float>>> by_mode;
      for (const bool recompute : {false, true}) {
        manual_seed(kSeed);
        Run run = pipeline_run(world,
                               {.micro_batches = micro_batches,
                                .schedule = schedule,
                                .defer_weight_gradients = schedule != PipelineSchedule::ZeroBubbleH1,
                                .recompute = recompute},
                               sgd, cpu(), list);
        run.trainer->fit(data, {.epochs = 2});
        CHECK(run.model->recomputed().size() == (recompute ? 1u : 0u));
        std::vector<std::vector<float>> state;
        for (const auto& entry : run.model->state_dict()) state.push_back(entry.second.to_vector<float>());
        by_mode.push_back(state);
      }
      CHECK(by_mode[0] == by_mode[1]);  // parameters and running statistics
    }
  }
}

TEST_CASE("Pipeline: Adadelta through the pipeline equals one process") {
  const Communicator world = Communicator::world();
  const MakeOptimizer adadelta = [](std::vector<Tensor> parameters) {
    return std::make_shared<optim::Adadelta>(std::move(parameters), optim::AdadeltaOptions{});
  };
  Run single = single_run(adadelta);
  auto data = training_data();
  single.trainer->fit(data, {.epochs = 2});
  Run run = pipeline_run(world, {.micro_batches = 3}, adadelta);
  run.trainer->fit(data, {.epochs = 2});
  CHECK(stage_difference(*run.model, *single.model) <= 1e-5);
}

TEST_CASE("Pipeline: rank 0 reports the metrics, evaluation and predictions of one process") {
  const Communicator world = Communicator::world();
  Run single = single_run();
  // One micro-batch computes what one process does, bit for bit.
  Run run = pipeline_run(world, {.micro_batches = 1});
  auto data = training_data();
  const optim::History expected = single.trainer->fit(data, {.epochs = 1});
  const optim::History actual = run.trainer->fit(data, {.epochs = 1});
  REQUIRE(stage_difference(*run.model, *single.model) == 0.0);
  // Every rank reports rank 0's figures, summed over the ranks.
  CHECK(actual.epochs[0].at("loss") == expected.epochs[0].at("loss"));
  CHECK(actual.epochs[0].at("accuracy") == expected.epochs[0].at("accuracy"));

  models::DataLoader test_data(random_images(), {.batch_size = 20});  // batches of 20, 20 and 8
  const optim::Logs single_logs = single.trainer->evaluate(test_data);
  const Tensor reference = single.trainer->predict(test_data);
  CHECK(run.trainer->evaluate(test_data).at("loss") == single_logs.at("loss"));
  const Tensor predicted = run.trainer->predict(test_data);
  if (world.rank() == 0) {
    CHECK(predicted.to_vector<float>() == reference.to_vector<float>());
  } else {
    CHECK_FALSE(predicted.defined());  // only the rank that reports has outputs
  }

  // The same weights evaluated in 3 micro-batches per batch: the products
  // change shape, so float32 rounding may differ, by a few ulps of the
  // largest output.
  Run split = pipeline_run(world, {.micro_batches = 3});
  split.model->load_state_dict(run.model->state_dict());
  const optim::Logs split_logs = split.trainer->evaluate(test_data);
  CHECK(split_logs.at("loss") == doctest::Approx(single_logs.at("loss")).epsilon(1e-6));
  CHECK(split_logs.at("accuracy") == single_logs.at("accuracy"));
  const Tensor split_predicted = split.trainer->predict(test_data);
  if (world.rank() == 0) {
    const auto a = split_predicted.to_vector<float>(), b = reference.to_vector<float>();
    REQUIRE(a.size() == b.size());
    double largest = 0.0, difference = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      largest = std::max(largest, std::abs(double{b[i]}));
      difference = std::max(difference, std::abs(double{a[i]} - b[i]));
    }
    CHECK(difference <= 8.0 * largest * std::numeric_limits<float>::epsilon());
  }
}

TEST_CASE(
    "Pipeline: a checkpoint is one single-process file, resuming on the same or another stage count, or in "
    "one process, goes on exactly") {
  const Communicator world = Communicator::world();
  Run straight = single_run();
  auto data = training_data();
  straight.trainer->fit(data, {.epochs = 2});

  std::optional<TempDir> directory;
  const std::string path = shared_path(world, directory, "epoch1.ckpt");
  {
    Run first = pipeline_run(world, {.micro_batches = 2});
    first.trainer->fit(data, {.epochs = 1});
    first.trainer->save_checkpoint(path);  // every rank: the stages send rank 0 their state
  }
  world.barrier();

  SUBCASE("the same stages") {
    Run resumed = pipeline_run(world, {.micro_batches = 2});
    resumed.trainer->load_checkpoint(path);
    resumed.trainer->fit(data, {.epochs = 2});
    CHECK(stage_difference(*resumed.model, *straight.model) <= 1e-5);
  }
  SUBCASE("one stage fewer, on the other ranks") {
    // Ranks 0..n-2 form the smaller pipeline (a single stage with 2 ranks);
    // the last rank sits this one out.
    const bool member = world.rank() + 1 < world.size();
    const Communicator smaller = world.split(member ? 0 : 1, world.rank());
    if (member) {
      Run resumed = pipeline_run(smaller, {.micro_batches = 3});
      resumed.trainer->load_checkpoint(path);
      resumed.trainer->fit(data, {.epochs = 2});
      CHECK(stage_difference(*resumed.model, *straight.model) <= 1e-5);
    }
  }
  SUBCASE("one process") {
    if (world.rank() == 0) {
      Run resumed = single_run();
      resumed.trainer->load_checkpoint(path);
      resumed.trainer->fit(data, {.epochs = 2});
      CHECK(stage_difference(*resumed.model, *straight.model) <= 1e-5);
    }
  }
  world.barrier();  // rank 0 removes the directory only after everyone has read the file
}

TEST_CASE("Pipeline: a checkpoint taken mid-epoch resumes bit for bit, metrics included") {
  const Communicator world = Communicator::world();
  std::optional<TempDir> directory;
  const std::string path = shared_path(world, directory, "last.ckpt");
  const auto every_3_steps = std::make_shared<optim::ModelCheckpoint>(optim::ModelCheckpointOptions{
      .directory = std::filesystem::path(path).parent_path().string(), .save_best = false, .every_steps = 3});
  auto data = training_data();  // 4 steps per epoch
  Run straight = pipeline_run(world, {.micro_batches = 2});
  const optim::History uninterrupted = straight.trainer->fit(data, {.epochs = 2});

  Run first = pipeline_run(world, {.micro_batches = 2});
  first.trainer->fit(data, {.epochs = 1, .callbacks = {every_3_steps}});
  // Saved at epoch 1's end, then after 2 steps of epoch 2 (the sixth step).
  CHECK_THROWS_AS(first.trainer->fit(data, {.epochs = 2, .callbacks = {every_3_steps, std::make_shared<StopAt>(7)}}),
                  StopAt::Stopped);
  world.barrier();

  Run resumed = pipeline_run(world, {.micro_batches = 2});
  resumed.trainer->load_checkpoint(path);
  CHECK(resumed.trainer->epoch_batches() == 2);
  const optim::History rest = resumed.trainer->fit(data, {.epochs = 2});
  CHECK(flat_parameters(*resumed.model) == flat_parameters(*straight.model));
  if (world.rank() == 0) {
    REQUIRE(rest.epochs.size() == 1);
    CHECK(rest.epochs[0].at("loss") == uninterrupted.epochs[1].at("loss"));
    CHECK(rest.epochs[0].at("accuracy") == uninterrupted.epochs[1].at("accuracy"));
  }
  world.barrier();
}

TEST_CASE("Pipeline: a checkpoint written under zb-h2 resumes under gpipe, bit for bit an uninterrupted 1f1b run") {
  const Communicator world = Communicator::world();
  std::optional<TempDir> directory;
  const std::string path = shared_path(world, directory, "last.ckpt");
  const auto every_3_steps = std::make_shared<optim::ModelCheckpoint>(optim::ModelCheckpointOptions{
      .directory = std::filesystem::path(path).parent_path().string(), .save_best = false, .every_steps = 3});
  auto data = training_data();
  // Weight gradients per micro-batch under every schedule: one sum, in one order.
  const auto options = [](PipelineSchedule schedule) {
    return PipelineOptions{.micro_batches = 3, .schedule = schedule, .defer_weight_gradients = false};
  };
  Run straight = pipeline_run(world, options(PipelineSchedule::OneFOneB));
  straight.trainer->fit(data, {.epochs = 2});
  Run first = pipeline_run(world, options(PipelineSchedule::ZeroBubbleH2));
  CHECK_THROWS_AS(first.trainer->fit(data, {.epochs = 2, .callbacks = {every_3_steps, std::make_shared<StopAt>(5)}}),
                  StopAt::Stopped);
  world.barrier();
  Run resumed = pipeline_run(world, options(PipelineSchedule::GPipe));
  resumed.trainer->load_checkpoint(path);
  resumed.trainer->fit(data, {.epochs = 2});
  CHECK(flat_parameters(*resumed.model) == flat_parameters(*straight.model));
  world.barrier();
}

TEST_CASE("Pipeline: several chunks per rank evaluate in evaluation mode before any training, as one stage would") {
  const Communicator world = Communicator::world();
  // Dropout would draw masks and BatchNorm update its statistics if a
  // chunk's probe of the shapes left the layers training.
  const layers::LayerList list = stateful_cnn_layers();
  auto data = training_data();
  manual_seed(kSeed);
  Run alone = pipeline_run(world.split(world.rank(), 0), {.micro_batches = 3}, sgd, cpu(), list);
  manual_seed(kSeed);
  Run chunked =
      pipeline_run(world, {.micro_batches = 3, .schedule = PipelineSchedule::Interleaved1F1B}, sgd, cpu(), list);
  const auto buffers_before = chunked.model->state_dict();
  const optim::Logs expected = alone.trainer->evaluate(data);
  const optim::Logs got = chunked.trainer->evaluate(data);
  CHECK(got.at("loss") == expected.at("loss"));
  CHECK(got.at("accuracy") == expected.at("accuracy"));
  const auto buffers_after = chunked.model->state_dict();
  REQUIRE(buffers_after.size() == buffers_before.size());
  for (std::size_t i = 0; i < buffers_after.size(); ++i) {
    CHECK_MESSAGE(buffers_after[i].second.to_vector<float>() == buffers_before[i].second.to_vector<float>(),
                  buffers_after[i].first);
  }
}

TEST_CASE("Pipeline: a checkpoint written by zb-v's chunks resumes on one stage per rank, bit for bit") {
  const Communicator world = Communicator::world();
  std::optional<TempDir> directory;
  const std::string path = shared_path(world, directory, "last.ckpt");
  const auto every_3_steps = std::make_shared<optim::ModelCheckpoint>(optim::ModelCheckpointOptions{
      .directory = std::filesystem::path(path).parent_path().string(), .save_best = false, .every_steps = 3});
  const layers::LayerList list = deep_mlp_layers();
  auto data = training_data();
  const auto options = [](PipelineSchedule schedule) {
    return PipelineOptions{.micro_batches = 3, .schedule = schedule, .defer_weight_gradients = false};
  };
  Run straight = pipeline_run(world, options(PipelineSchedule::OneFOneB), sgd, cpu(), list);
  straight.trainer->fit(data, {.epochs = 2});
  Run first = pipeline_run(world, options(PipelineSchedule::ZeroBubbleV), sgd, cpu(), list);
  CHECK_THROWS_AS(first.trainer->fit(data, {.epochs = 2, .callbacks = {every_3_steps, std::make_shared<StopAt>(5)}}),
                  StopAt::Stopped);
  world.barrier();
  Run resumed = pipeline_run(world, options(PipelineSchedule::OneFOneB), sgd, cpu(), list);
  resumed.trainer->load_checkpoint(path);
  resumed.trainer->fit(data, {.epochs = 2});
  CHECK(flat_parameters(*resumed.model) == flat_parameters(*straight.model));
  // And back: the same file, resumed onto interleaved chunks, ends with the
  // whole model the uninterrupted run saves.
  Run chunked = pipeline_run(world, options(PipelineSchedule::Interleaved1F1B), sgd, cpu(), list);
  chunked.trainer->load_checkpoint(path);
  chunked.trainer->fit(data, {.epochs = 2});
  std::optional<TempDir> final_directory;
  const std::string final_path = shared_path(world, final_directory, "final.ckpt");
  straight.trainer->save_checkpoint(final_path);
  world.barrier();
  Generator generator(kSeed);
  const auto whole = list.build(&generator);
  optim::Trainer reader(whole, layers::cross_entropy, sgd(whole->parameters()), quiet_options({}));
  reader.load_checkpoint(final_path);
  check_same_bits(*chunked.model, *whole);
  world.barrier();
}

TEST_CASE("Pipeline: stages on GPUs train as stages on the CPU, activations and gradients staged through the host" *
          doctest::test_suite("cuda")) {
  const Communicator world = Communicator::world();
  if (!every_rank_has_a_gpu(world)) return test::skip("a rank has no CUDA device");
  // Ranks may share a GPU: the messages go through host memory over MPI.
  const Device gpu = cuda(world.local_rank() % device_count(DeviceType::CUDA));
  auto cpu_data = training_data();
  Run on_cpu = pipeline_run(world, {.micro_batches = 3});
  on_cpu.trainer->fit(cpu_data, {.epochs = 2});
  auto gpu_data = training_data(gpu);
  Run on_gpu = pipeline_run(world, {.micro_batches = 3}, sgd, gpu);
  on_gpu.trainer->fit(gpu_data, {.epochs = 2});
  // cuDNN's and Eigen's sums differ in order: the runs agree to rounding.
  CHECK(max_relative_difference(flat_parameters(*on_gpu.model), flat_parameters(*on_cpu.model)) <= 1e-4);
  for (const Tensor& parameter : on_gpu.model->parameters()) CHECK(parameter.device() == gpu);
}

TEST_CASE("Pipeline: every stage's report reaches every rank: its memory, messages and time") {
  const Communicator world = Communicator::world();
  Run run = pipeline_run(world, {.micro_batches = 3, .schedule = PipelineSchedule::GPipe});
  auto monitor = std::make_shared<optim::StepMemoryMonitor>(std::vector<Device>{cpu()});
  auto data = training_data();
  run.trainer->fit(data, {.epochs = 1, .callbacks = {monitor}});
  const auto reports =
      parallel::gather_stage_reports(*run.pipeline, *run.model, run.trainer->optimizer(), monitor.get());
  REQUIRE(reports.size() == static_cast<std::size_t>(world.size()));
  const auto split = parallel::balanced_split(std::vector<double>(7, 1.0), world.size());
  const layers::LayerList list = small_cnn_layers();
  const std::vector<std::size_t> layer_bytes = list.parameter_bytes();
  for (int s = 0; s < world.size(); ++s) {
    CAPTURE(s);
    const parallel::StageReport& r = reports[static_cast<std::size_t>(s)];
    CHECK(r.stage == s);
    CHECK(r.layers == std::vector{split[static_cast<std::size_t>(s)]});
    double bytes = 0.0;
    for (std::size_t l = r.layers.front().first; l <= r.layers.front().last; ++l)
      bytes += static_cast<double>(layer_bytes[l]);
    CHECK(r.parameter_bytes == bytes);
    CHECK(r.optimizer_bytes == bytes);  // SGD's momentum: one buffer per parameter
    CHECK(r.statistics.steps == 4);
    CHECK(r.statistics.peak_micro_batches == 3);  // GPipe holds every micro-batch
    // Activations on, gradients back: 3 a step each way, but none beyond the ends.
    const int directions = (s > 0 ? 1 : 0) + (s + 1 < world.size() ? 1 : 0);
    CHECK(r.statistics.messages == 4 * 3 * directions);
    CHECK(r.statistics.compute_seconds > 0.0);
    CHECK(r.statistics.compute_seconds <= r.statistics.step_seconds);
    // The first step's times, part of the totals, kept apart for the bubble.
    CHECK(r.statistics.first_compute_seconds > 0.0);
    CHECK(r.statistics.first_compute_seconds <= r.statistics.first_step_seconds);
    CHECK(r.statistics.first_step_seconds < r.statistics.step_seconds);
    CHECK(r.peak_resident_bytes > 0.0);
  }
  CHECK(reports[0].peak_activation_bytes > 0.0);
  const std::string table = parallel::format_stage_reports(reports, run.pipeline->options());
  CHECK(table.find(fmt::format("textbook (p-1)/(M+p-1) = {:.1f}%",
                               100.0 * (world.size() - 1) / (3 + world.size() - 1))) != std::string::npos);
  // Each stage's row: the micro-batches it held, beside its schedule's 3.
  for (int s = 0; s < world.size(); ++s) {
    CAPTURE(s);
    const std::size_t row = table.find(fmt::format("\n{} ", s));
    REQUIRE(row != std::string::npos);
    CHECK(table.substr(row, table.find('\n', row + 1) - row).find(" 3 (3) ") != std::string::npos);
  }
}

TEST_CASE("Pipeline: hybrid, dp pipelines of pp stages at batch B/dp each, equals one process at batch B") {
  const Communicator world = Communicator::world();
  Run single = single_run();
  auto data = training_data();
  single.trainer->fit(data, {.epochs = 2});
  for (int data_parallel = 2; data_parallel <= world.size(); ++data_parallel) {
    if (world.size() % data_parallel != 0) continue;
    const int stages = world.size() / data_parallel;
    CAPTURE(data_parallel);
    CAPTURE(stages);
    const parallel::ProcessGrid grid = parallel::ProcessGrid::split(world, data_parallel, stages);
    CHECK(grid.pipeline.size() == stages);
    CHECK(grid.data.size() == data_parallel);
    for (const auto algorithm : {parallel::AllreduceAlgorithm::ring, parallel::AllreduceAlgorithm::tree}) {
      const layers::LayerList list = small_cnn_layers();
      auto pipeline =
          std::make_shared<Pipeline>(grid, parallel::balanced_split(std::vector<double>(list.size(), 1.0), stages),
                                     PipelineOptions{.micro_batches = 2, .allreduce = algorithm});
      CHECK(pipeline->data_parallel() == data_parallel);
      CHECK(pipeline->shard().world == data_parallel);
      Generator generator(kSeed);
      auto model = parallel::build_stage(list, *pipeline, &generator);
      optim::Trainer trainer(model, layers::cross_entropy, sgd(model->parameters()),
                             quiet_options({optim::Metric::accuracy}, pipeline));
      models::DataLoader shard_data(random_images(),
                                    {.batch_size = kGlobalBatch / data_parallel, .shuffle = true, .seed = 3});
      trainer.fit(shard_data, {.epochs = 2});
      CHECK(stage_difference(*model, *single.model) <= 1e-5);
    }
    // zb-h1 accumulates its weight gradients after the stage's last backward
    // too: each bucket still goes out once, with every micro-batch's sum.
    auto zero_bubble = std::make_shared<Pipeline>(
        grid, parallel::balanced_split(std::vector<double>(small_cnn_layers().size(), 1.0), stages),
        PipelineOptions{.micro_batches = 3, .schedule = PipelineSchedule::ZeroBubbleH1});
    Generator generator(kSeed);
    auto model = parallel::build_stage(small_cnn_layers(), *zero_bubble, &generator);
    optim::Trainer trainer(model, layers::cross_entropy, sgd(model->parameters()),
                           quiet_options({optim::Metric::accuracy}, zero_bubble));
    models::DataLoader shard_data(random_images(),
                                  {.batch_size = kGlobalBatch / data_parallel, .shuffle = true, .seed = 3});
    trainer.fit(shard_data, {.epochs = 2});
    CHECK(stage_difference(*model, *single.model) <= 1e-5);
  }
  CHECK(throws_error_mentioning([&] { parallel::ProcessGrid::split(world, world.size() + 1, 1); },
                                {fmt::format("{} data-parallel x 1 pipeline x 1 tensor ranks need {} ranks; this "
                                             "job has {}",
                                             world.size() + 1, world.size() + 1, world.size())}));
}

TEST_CASE("Pipeline: stages that do not fit the ranks or the model are refused on every rank") {
  const Communicator world = Communicator::world();
  const std::size_t ranks = static_cast<std::size_t>(world.size());
  std::vector<parallel::StageRange> too_few(ranks - 1);
  for (std::size_t i = 0; i < too_few.size(); ++i) too_few[i] = {i, i};
  CHECK(throws_error_mentioning([&] { Pipeline(world, too_few); },
                                {fmt::format("{} stages for {} ranks", ranks - 1, ranks)}));
  std::vector<parallel::StageRange> gap(ranks);
  for (std::size_t i = 0; i < ranks; ++i) gap[i] = {2 * i, 2 * i};
  CHECK(throws_error_mentioning([&] { Pipeline(world, gap); }, {"stage 1 holds layers 2-2", "start at layer 1"}));
  CHECK(throws_error_mentioning(
      [&] {
        Pipeline(world, parallel::balanced_split(std::vector<double>(7, 1.0), world.size()), {.micro_batches = -1});
      },
      {"micro_batches = -1"}));

  // Every rank given the whole model: each learns that some stage's is wrong.
  auto pipeline = std::make_shared<Pipeline>(world, parallel::balanced_split(std::vector<double>(7, 1.0), world.size()),
                                             PipelineOptions{});
  Generator generator(kSeed);
  auto whole = small_cnn_layers().build(&generator);
  optim::Trainer trainer(whole, layers::cross_entropy, sgd(whole->parameters()), quiet_options({}, pipeline));
  auto data = training_data();
  CHECK(throws_error_mentioning([&] { trainer.fit(data, {.epochs = 1}); }, {"Pipeline"}));
  // A model that is not a Sequential cannot be cut into stages.
  auto dense = std::make_shared<layers::Dense>(144, 10, true, &generator);
  optim::Trainer not_sequential(dense, layers::cross_entropy, sgd(dense->parameters()), quiet_options({}, pipeline));
  CHECK(throws_error_mentioning([&] { not_sequential.fit(data, {.epochs = 1}); },
                                {"was given a Dense, not a Sequential"}));
  CHECK(throws_error_mentioning([&] { parallel::build_stage(models::model_layers("lenet5"), *pipeline); },
                                {"the model has 12 layers"}));
}

}  // namespace ddl::test
