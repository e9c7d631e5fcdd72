// parallel::make_setup in one process (parallel/setup.hpp): the strategy
// kinds by name, the ranks that share each batch for every kind and the
// configurations that do not fit a job, and the single-process setups (the
// whole model, or its layers placed on logical devices) against the model
// built by hand. The setups over ranks are tested under mpiexec
// (tests/parallel/test_setup.cpp).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <ddl/ddl.hpp>

#include "support/test_data.hpp"

namespace ddl::test {
namespace {

using parallel::ConfigError;
using parallel::ParallelConfig;
using parallel::StrategyKind;

// Whether `call` throws a ConfigError (a configuration that does not fit,
// not a failure while running) mentioning every one of `parts`.
template <class Call>
Comparison config_error_mentioning(Call&& call, const std::vector<std::string>& parts) {
  return throws_error_mentioning<ConfigError>(std::forward<Call>(call), parts);
}

ParallelConfig kind(StrategyKind strategy) { return {.kind = strategy}; }

// 16 random 28x28 images with labels 0..9 in turn.
models::Dataset random_digits() {
  Generator generator(7);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < 16; ++i) labels.push_back(i % 10);
  return {uniform({16, 1, 28, 28}, 0.0f, 1.0f, {}, &generator), from_vector(labels, {16})};
}

}  // namespace

TEST_CASE("Setup: every strategy kind is parsed by the name it prints, and an unknown one lists them") {
  for (const StrategyKind strategy : parallel::all_strategy_kinds()) {
    CHECK(parallel::parse_strategy_kind(parallel::strategy_kind_name(strategy)) == strategy);
  }
  CHECK(parallel::strategy_kind_name(StrategyKind::parameter_server) == "ps");
  CHECK(throws_error_mentioning([] { parallel::parse_strategy_kind("fsdp"); },
                                {"unknown parallel strategy 'fsdp'", "none, data, ps, pipeline, hybrid"}));
  CHECK(parallel::is_pipelined(StrategyKind::pipeline));
  CHECK(parallel::is_pipelined(StrategyKind::hybrid));
  CHECK_FALSE(parallel::is_pipelined(StrategyKind::data));
}

TEST_CASE("Setup: every overlap is parsed by the name it prints, and an unknown one lists them") {
  for (const parallel::Overlap overlap : parallel::all_overlaps()) {
    CHECK(parallel::parse_overlap(parallel::overlap_name(overlap)) == overlap);
  }
  CHECK(parallel::overlap_name(parallel::Overlap::automatic) == "auto");
  CHECK(throws_error_mentioning([] { parallel::parse_overlap("sometimes"); },
                                {"unknown overlap 'sometimes'", "auto, on, off"}));
}

TEST_CASE("Setup: the ranks that share each batch, for every kind and rank count") {
  for (const int world : {1, 2, 3, 4, 7}) {
    CAPTURE(world);
    CHECK(parallel::data_ranks(kind(StrategyKind::pipeline), world) == 1);  // every stage reads every batch
    if (world > 1) {
      CHECK(parallel::data_ranks(kind(StrategyKind::data), world) == world);
      ParallelConfig ps = kind(StrategyKind::parameter_server);
      ps.parameter_server.servers = world - 1;
      CHECK(parallel::data_ranks(ps, world) == 1);
      ps.parameter_server.servers = 1;
      CHECK(parallel::data_ranks(ps, world) == world - 1);
    }
  }
  CHECK(parallel::data_ranks(kind(StrategyKind::none), 1) == 1);
  ParallelConfig hybrid = kind(StrategyKind::hybrid);
  hybrid.layout = {.stages = 2, .pipelines = 3};
  CHECK(parallel::data_ranks(hybrid, 6) == 3);
  ParallelConfig tensor = kind(StrategyKind::tensor);
  CHECK(parallel::data_ranks(tensor, 4) == 1);  // one group of every rank
  tensor.tensor_ranks = 2;
  CHECK(parallel::data_ranks(tensor, 6) == 3);  // 3 replicas of a group of 2
}

TEST_CASE("Setup: a configuration that does not fit the job's ranks is a ConfigError naming both") {
  CHECK(config_error_mentioning([] { parallel::data_ranks(kind(StrategyKind::none), 2); },
                                {"started as 2 MPI ranks without a parallel strategy"}));
  ParallelConfig ps = kind(StrategyKind::parameter_server);
  ps.parameter_server.servers = 3;
  CHECK(config_error_mentioning([&] { parallel::data_ranks(ps, 3); }, {"3 server(s) among 3 ranks"}));
  ParallelConfig pipeline = kind(StrategyKind::pipeline);
  pipeline.layout.stages = 3;
  CHECK(config_error_mentioning([&] { parallel::data_ranks(pipeline, 2); },
                                {"stages: 3 stages need 3 ranks", "this job has 2", "mpiexec -n 3"}));
  ParallelConfig hybrid = kind(StrategyKind::hybrid);
  CHECK(config_error_mentioning([&] { parallel::data_ranks(hybrid, 4); }, {"a pipeline count and a stage count"}));
  hybrid.layout = {.stages = 2, .pipelines = 3};
  CHECK(config_error_mentioning([&] { parallel::data_ranks(hybrid, 4); },
                                {"3 pipelines x 2 stages need 6 ranks", "this job has 4"}));
  ParallelConfig tensor = kind(StrategyKind::tensor);
  tensor.tensor_ranks = 3;
  CHECK(config_error_mentioning([&] { parallel::data_ranks(tensor, 4); },
                                {"tp: tensor groups of 3 ranks do not divide the job's 4 ranks"}));
}

TEST_CASE("Setup: a pipeline's micro-batches default to two per stage, in one place") {
  CHECK(parallel::micro_batches(parallel::PipelineOptions{}, 3) == 2 * 3);
  CHECK(parallel::micro_batches(parallel::PipelineOptions{.micro_batches = 5}, 3) == 5);
}

TEST_CASE("Setup: one process gets a plain strategy and the model a LayerList builds, on the device asked for") {
  const auto layers = models::model_layers("lenet5");
  Generator by_hand(11), by_setup(11);
  const auto expected = layers.build(&by_hand);
  const auto setup = parallel::make_setup(kind(StrategyKind::none), std::nullopt, layers,
                                          {.sample_shape = Shape({1, 28, 28}), .batch = 8, .weights = &by_setup});
  REQUIRE(setup.strategy != nullptr);
  CHECK(dynamic_cast<parallel::LayerPlacement*>(setup.strategy.get()) == nullptr);
  CHECK(setup.strategy->world_size() == 1);
  CHECK(setup.device == cpu(0));
  CHECK(setup.data_ranks == 1);
  CHECK(setup.where == "cpu:0");
  CHECK(setup.stages.empty());
  CHECK(setup.scope.empty());
  CHECK(setup.strategy->describe(8).empty());
  CHECK(flat_parameters(*setup.model) == flat_parameters(*expected));
}

TEST_CASE("Setup: a placement puts each layer on its device and reports each device's memory after training") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  ParallelConfig config = kind(StrategyKind::none);
  config.placement = "0-4=cpu:0,5-11=cpu:1";
  Generator weights(5);
  const auto setup = parallel::make_setup(config, std::nullopt, models::model_layers("lenet5"),
                                          {.sample_shape = Shape({1, 28, 28}), .batch = 8, .weights = &weights});
  CHECK(dynamic_cast<parallel::LayerPlacement*>(setup.strategy.get()) != nullptr);
  CHECK(setup.where == "placed 0-4=cpu:0,5-11=cpu:1, data on cpu:0");
  CHECK(setup.model->placement()[4] == cpu(0));
  CHECK(setup.model->placement()[5] == cpu(1));

  auto optimizer = std::make_shared<optim::SGD>(setup.model->parameters(), optim::SgdOptions{.lr = 0.01});
  optim::Trainer trainer(setup.model, layers::cross_entropy, optimizer, quiet_options({}, setup.strategy));
  models::DataLoader data(random_digits(), {.batch_size = 8});
  trainer.fit(data, {.epochs = 1});
  const std::string report = setup.strategy->report(*setup.model, *optimizer);
  CHECK(report.starts_with("memory per device (peaks over the training steps):\n"));
  CHECK(report.find("cpu:0") != std::string::npos);
  CHECK(report.find("cpu:1") != std::string::npos);
}

TEST_CASE("Setup: what does not fit one process is refused before anything is built") {
  const auto layers = models::model_layers("lenet5");
  const parallel::RunRequest request{.sample_shape = Shape({1, 28, 28}), .batch = 8};
  ParallelConfig placed_and_data = kind(StrategyKind::data);
  placed_and_data.placement = "0-11=cpu:0";
  CHECK(config_error_mentioning([&] { parallel::make_setup(placed_and_data, std::nullopt, layers, request); },
                                {"placement: places layers inside one process", "data"}));
  CHECK(config_error_mentioning([&] { parallel::make_setup(kind(StrategyKind::data), std::nullopt, layers, request); },
                                {"the data strategy", parallel::Communicator::built()
                                                               ? "needs several ranks: start it with mpiexec -n N"
                                                               : "built without it (DDL_MPI=OFF)"}));
  // What needs several ranks says so (or that MPI is missing) before any
  // count of ranks is compared.
  const std::string not_alone =
      parallel::Communicator::built() ? "needs several ranks: start it with mpiexec -n N" : "built without it";
  ParallelConfig ps = kind(StrategyKind::parameter_server);
  CHECK(config_error_mentioning([&] { parallel::data_ranks(ps, 1); }, {"the ps strategy", not_alone}));
  ParallelConfig grid = kind(StrategyKind::hybrid);
  grid.layout = {.stages = 2, .pipelines = 2};
  CHECK(config_error_mentioning([&] { parallel::data_ranks(grid, 1); },
                                {parallel::Communicator::built() ? "2 pipelines x 2 stages need 4 ranks; this job has 1"
                                                                 : "the hybrid strategy needs MPI"}));
  ParallelConfig bad_plan = kind(StrategyKind::none);
  bad_plan.placement = "0-3=cpu:0";
  CHECK(config_error_mentioning([&] { parallel::make_setup(bad_plan, std::nullopt, layers, request); },
                                {"placement: "}));
  CHECK(config_error_mentioning(
      [&] {
        parallel::make_setup(kind(StrategyKind::none), std::nullopt, layers,
                             {.sample_shape = Shape({1, 28, 28}), .batch = 8, .device = "tpu"});
      },
      {"device tpu"}));
}

}  // namespace ddl::test
