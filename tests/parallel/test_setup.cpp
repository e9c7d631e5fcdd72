// parallel::make_setup over all the ranks (2, 3 and 4 under ctest): every
// strategy it assembles trains the weights the same strategy built by hand
// trains, bit for bit, says what it is in the words the run's header and
// end-of-run report print, and a configuration that does not fit the job is
// the same ConfigError on every rank, before any rank waits for another.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <ddl/ddl.hpp>

#include "parallel/training_fixtures.hpp"

namespace ddl::test {
namespace {

using parallel::Communicator;
using parallel::ParallelConfig;
using parallel::StrategyKind;

constexpr std::uint64_t kSeed = 5;

// 2 epochs of `model` (on the CPU) under `strategy` at the global batch,
// each data shard reading its part of it; the parameters this rank ends
// with, and the strategy's report.
struct Trained {
  std::vector<float> parameters;
  std::string report;
};
Trained train_model(const std::shared_ptr<optim::Strategy>& strategy,
                    const std::shared_ptr<layers::Sequential>& model) {
  auto optimizer = sgd_with_momentum()(model->parameters());
  optim::Trainer trainer(model, layers::cross_entropy, optimizer, quiet_options({}, strategy));
  models::DataLoader loader(random_images(),
                            {.batch_size = kGlobalBatch / strategy->shard().world, .shuffle = true, .seed = 3});
  trainer.fit(loader, {.epochs = 2});
  return {flat_parameters(*model), strategy->report(*model, *optimizer)};
}

parallel::ParallelSetup setup_of(const ParallelConfig& config, const Communicator& world) {
  Generator weights(kSeed);
  return parallel::make_setup(config, world, small_cnn_layers(),
                              {.sample_shape = Shape({1, 12, 12}), .batch = kGlobalBatch, .weights = &weights});
}

std::shared_ptr<layers::Sequential> whole_model() {
  Generator weights(kSeed);
  return small_cnn_layers().build(&weights);
}

// Stage s of `world` holds the layers a balance by layer count gives it.
std::vector<parallel::StageRange> even_split(int stages) {
  return parallel::balanced_split(std::vector<double>(small_cnn_layers().size(), 1.0), stages);
}

}  // namespace

TEST_CASE("Setup: data parallelism from make_setup trains as a DataParallel built by hand, bit for bit") {
  const Communicator world = Communicator::world();
  for (const auto algorithm : {parallel::AllreduceAlgorithm::ring, parallel::AllreduceAlgorithm::tree}) {
    CAPTURE(parallel::algorithm_name(algorithm));
    ParallelConfig config{.kind = StrategyKind::data, .data = {.algorithm = algorithm}};
    const parallel::ParallelSetup setup = setup_of(config, world);
    CHECK(setup.data_ranks == world.size());
    CHECK(setup.device == cpu(0));
    CHECK(setup.scope == fmt::format("{} ranks", world.size()));
    CHECK(setup.strategy->describe(kGlobalBatch / world.size()) ==
          fmt::format("data-parallel over {} ranks ({} allreduce, {} per rank)", world.size(),
                      parallel::algorithm_name(algorithm), kGlobalBatch / world.size()));
    const Trained assembled = train_model(setup.strategy, setup.model);
    const Trained by_hand = train_model(std::make_shared<parallel::DataParallel>(world, config.data), whole_model());
    CHECK(assembled.parameters == by_hand.parameters);
    CHECK(assembled.report.starts_with("gradient synchronisation: "));
    CHECK(assembled.report.find("of step time spent waiting (1 bucket, overlap off (one bucket))") !=
          std::string::npos);
  }
}

TEST_CASE("Setup: allreduce auto becomes one algorithm on every rank, said in the setup, and trains as it") {
  const Communicator world = Communicator::world();
  ParallelConfig config{.kind = StrategyKind::data, .data = {.algorithm = parallel::AllreduceAlgorithm::automatic}};
  const parallel::ParallelSetup setup = setup_of(config, world);
  const auto& strategy = dynamic_cast<const parallel::DataParallel&>(*setup.strategy);
  const parallel::AllreduceAlgorithm chosen = strategy.options().algorithm;
  CHECK(chosen != parallel::AllreduceAlgorithm::automatic);
  CHECK(setup.allreduce_choice.starts_with(
      fmt::format("allreduce auto: {} ({} ranks", parallel::algorithm_name(chosen), world.size())));
  CHECK(setup.allreduce_choice.find("predicted for") != std::string::npos);
  // Every rank chose the same: rank 0's measurements decide.
  std::vector<double> chosen_by(static_cast<std::size_t>(world.size()), 0.0);
  chosen_by[static_cast<std::size_t>(world.rank())] = static_cast<double>(chosen);
  world.sum_doubles(chosen_by);
  for (const double each : chosen_by) CHECK(each == static_cast<double>(chosen));
  config.data.algorithm = chosen;
  CHECK(train_model(setup.strategy, setup.model).parameters ==
        train_model(std::make_shared<parallel::DataParallel>(world, config.data), whole_model()).parameters);
}

TEST_CASE("Setup: a parameter server from make_setup trains as one built by hand, bit for bit") {
  const Communicator world = Communicator::world();
  ParallelConfig config{.kind = StrategyKind::parameter_server, .parameter_server = {.servers = 1}};
  const parallel::ParallelSetup setup = setup_of(config, world);
  CHECK(setup.data_ranks == world.size() - 1);
  CHECK(setup.strategy->describe(6) ==
        fmt::format("synchronous parameter server: {} worker(s) of 6 per step and 1 server(s)", world.size() - 1));
  const Trained assembled = train_model(setup.strategy, setup.model);
  const Trained by_hand =
      train_model(std::make_shared<parallel::ParameterServer>(world, config.parameter_server), whole_model());
  CHECK(assembled.parameters == by_hand.parameters);
  CHECK(assembled.report.empty());
}

TEST_CASE("Setup: a pipeline from make_setup builds this rank's stage and trains as one built by hand, bit for bit") {
  const Communicator world = Communicator::world();
  ParallelConfig config{.kind = StrategyKind::pipeline,
                        .pipeline = {.micro_batches = 3},
                        .layout = {.balance = parallel::StageBalance::Layers}};
  const parallel::ParallelSetup setup = setup_of(config, world);
  CHECK(setup.data_ranks == 1);
  CHECK(setup.scope.empty());
  CHECK(setup.strategy->describe(kGlobalBatch).empty());  // the stage table says it
  CHECK(setup.stages.starts_with(fmt::format(
      "pipeline of {} stages (1f1b, 3 micro-batches per batch, weight gradients per batch), balanced by layers",
      world.size())));
  auto by_hand = std::make_shared<parallel::Pipeline>(world, even_split(world.size()), config.pipeline);
  Generator weights(kSeed);
  const auto stage = parallel::build_stage(small_cnn_layers(), *by_hand, &weights);
  const Trained assembled = train_model(setup.strategy, setup.model);
  const Trained hand_trained = train_model(by_hand, stage);
  CHECK(assembled.parameters == hand_trained.parameters);
  CHECK(assembled.report.starts_with("pipeline stages (peaks over the training steps):\n"));
  CHECK(assembled.report.find("bubble: ") != std::string::npos);

  // Split points given instead, and the default micro-batches: 2 per stage.
  config.pipeline.micro_batches = 0;
  config.layout.split = world.size() == 2 ? "4" : world.size() == 3 ? "2,4" : "1,3,5";
  const parallel::ParallelSetup split = setup_of(config, world);
  CHECK(split.stages.starts_with(fmt::format(
      "pipeline of {} stages (1f1b, {} micro-batches per batch, weight gradients per batch), split before layers {}",
      world.size(), 2 * world.size(), config.layout.split)));
}

TEST_CASE("Setup: hybrid parallelism from make_setup trains as a grid built by hand, bit for bit") {
  const Communicator world = Communicator::world();
  // 2 pipelines where the ranks divide by 2, else one pipeline of one stage per rank.
  const int pipelines = world.size() % 2 == 0 ? 2 : world.size();
  const int stages = world.size() / pipelines;
  ParallelConfig config{
      .kind = StrategyKind::hybrid,
      .pipeline = {.micro_batches = 2, .allreduce = parallel::AllreduceAlgorithm::tree},
      .layout = {.stages = stages, .pipelines = pipelines, .balance = parallel::StageBalance::Layers}};
  const parallel::ParallelSetup setup = setup_of(config, world);
  CHECK(setup.data_ranks == pipelines);
  CHECK(setup.scope == fmt::format("{} pipelines", pipelines));
  CHECK(setup.strategy->describe(6) == fmt::format("{} pipelines (tree allreduce, 6 per pipeline)", pipelines));
  auto by_hand = std::make_shared<parallel::Pipeline>(parallel::ProcessGrid::split(world, pipelines, stages),
                                                      even_split(stages), config.pipeline);
  Generator weights(kSeed);
  const auto stage = parallel::build_stage(small_cnn_layers(), *by_hand, &weights);
  const Trained assembled = train_model(setup.strategy, setup.model);
  CHECK(assembled.parameters == train_model(by_hand, stage).parameters);
  // The stage's gradients are averaged through data parallelism's buckets,
  // whose statistics its report ends with.
  const auto& pipeline = dynamic_cast<const parallel::Pipeline&>(*setup.strategy);
  CHECK(pipeline.gradients().bucket_count() == (setup.model->parameters().empty() ? 0 : 1));
  CHECK(assembled.report.find(fmt::format("stage {}: gradient synchronisation: ", pipeline.stage())) !=
        std::string::npos);
}

TEST_CASE("Setup: a configuration that does not fit the job is the same ConfigError on every rank") {
  const Communicator world = Communicator::world();
  const auto refused = [&](const ParallelConfig& config) {
    try {
      setup_of(config, world);
    } catch (const parallel::ConfigError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  ParallelConfig too_many_stages{.kind = StrategyKind::pipeline, .layout = {.stages = world.size() + 1}};
  CHECK(refused(too_many_stages)
            .find(fmt::format("stages: {} stages need {} ranks, one per stage; this job has {}", world.size() + 1,
                              world.size() + 1, world.size())) != std::string::npos);
  ParallelConfig bad_split{.kind = StrategyKind::pipeline, .layout = {.split = "99"}};
  CHECK(refused(bad_split).starts_with("split: "));
  ParallelConfig alone{.kind = StrategyKind::none};
  CHECK(refused(alone).find(fmt::format("started as {} MPI ranks without a parallel strategy", world.size())) !=
        std::string::npos);
  ParallelConfig all_servers{.kind = StrategyKind::parameter_server, .parameter_server = {.servers = world.size()}};
  CHECK(refused(all_servers).find(fmt::format("{} server(s) among {} ranks", world.size(), world.size())) !=
        std::string::npos);
  for (const StrategyKind kind : {StrategyKind::pipeline, StrategyKind::tensor}) {
    ParallelConfig automatic{.kind = kind,
                             .data = {.algorithm = parallel::AllreduceAlgorithm::automatic},
                             .pipeline = {.allreduce = parallel::AllreduceAlgorithm::automatic}};
    CHECK(refused(automatic).starts_with("allreduce: auto chooses data parallelism's allreduce"));
  }
  // The ranks still agree: a collective after the refusals completes.
  world.barrier();
}

}  // namespace ddl::test
