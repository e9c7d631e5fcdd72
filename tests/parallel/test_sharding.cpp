// Sharded data parallelism (DataParallelOptions::sharding, ZeRO stages 1
// to 3) under mpiexec with 2, 3 and 4 ranks. The central property: a
// reduce-scatter, an update of each rank's chunk and an allgather of the
// parameters perform DataParallel's additions and multiplications, so the
// weights are DataParallel's, bit for bit. The model's parameter counts do
// not divide by 2, 3 or 4, so every rank's chunks differ in size and cut
// parameters apart.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <ddl/ddl.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline.hpp>
#include <ddl/parallel/strategies/sharding.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

using ddl::test::kGlobalBatch;
using ddl::test::MakeOptimizer;
using ddl::test::max_relative_difference;
using ddl::test::random_images;

namespace {

// Conv 1-5 3x3, BatchNorm, ReLU, MaxPool 2, Flatten, Dense 125-7, Tanh,
// Dense 7-11 (an eleventh class no label names): 1030 parameters, and
// BatchNorm's running statistics.
std::shared_ptr<layers::Sequential> odd_cnn(std::uint64_t seed) {
  Generator generator(seed);
  auto model = std::make_shared<layers::Sequential>();
  model->emplace<layers::Conv2d>(1, 5, layers::Conv2dOptions{}, &generator)
      .emplace<layers::BatchNorm2d>(5)
      .emplace<layers::ReLU>()
      .emplace<layers::MaxPool2d>()
      .emplace<layers::Flatten>()
      .emplace<layers::Dense>(125, 7, true, &generator)
      .emplace<layers::Tanh>()
      .emplace<layers::Dense>(7, 11, true, &generator);
  return model;
}

// Buckets of the last Dense bias alone (11 values), then its weight and the
// first Dense's (959), then the convolution's and BatchNorm's (60): at 2, 3
// and 4 ranks the chunks of the first two differ in size.
DataParallelOptions options(AllreduceAlgorithm algorithm, Sharding sharding, Overlap overlap = Overlap::off) {
  return {
      .algorithm = algorithm, .bucket_bytes = 1024, .first_bucket_bytes = 32, .overlap = overlap, .sharding = sharding};
}

struct Trained {
  std::vector<float> parameters;
  std::vector<float> buffers;  // BatchNorm's running statistics, this rank's own
  double evaluation_loss = 0.0;
  StateBytes resident;
  StateBytes formula;
};

std::vector<float> flat_buffers(const layers::Module& model) {
  std::vector<float> values;
  for (const auto& [name, tensor] : model.named_buffers()) {
    const auto part = tensor.to_vector<float>();
    values.insert(values.end(), part.begin(), part.end());
  }
  return values;
}

// Two epochs of odd_cnn on `device`, every rank from its own initial
// weights (prepare() broadcasts rank 0's), each optimizer step
// `batches_per_step` batches.
Trained train(const DataParallelOptions& options, const MakeOptimizer& make, std::int64_t batches_per_step = 1,
              const Device& device = cpu()) {
  const Communicator world = Communicator::world();
  auto model = odd_cnn(5 + 100 * static_cast<std::uint64_t>(world.rank()));
  model->to(device);
  auto strategy = std::make_shared<DataParallel>(world, options);
  optim::TrainerOptions trainer_options = test::quiet_options({}, strategy);
  trainer_options.batches_per_step = batches_per_step;
  const auto optimizer = make(model->parameters());
  optim::Trainer trainer(model, layers::cross_entropy, optimizer, trainer_options);
  models::DataLoader loader(random_images(),
                            {.batch_size = kGlobalBatch / world.size(), .shuffle = true, .seed = 3, .device = device});
  trainer.fit(loader, {.epochs = 2});
  models::DataLoader all(random_images(), {.batch_size = kGlobalBatch / world.size(), .device = device});
  const double evaluation_loss = trainer.evaluate(all).at("loss");
  const StateBytes resident = strategy->resident_state(*model, *optimizer);
  strategy->gather_parameters();  // stage 3: whole until the next step
  return {test::flat_parameters(*model), flat_buffers(*model), evaluation_loss, resident,
          strategy->formula_state(*model, *optimizer)};
}

}  // namespace

namespace {

// Every stage against DataParallel on `device`, for every optimizer, with
// ring and rhd, overlap on and off: the same weights, BatchNorm statistics
// and evaluation loss, bit for bit, and the state bytes of ZeRO's formula
// (three buckets, each cut into chunks of floor or ceil(n / p)). Stage 3
// over NCCL refuses overlap (DataParallel::prepare says why).
void every_stage_trains_unsharded_weights(const Device& device, bool over_nccl) {
  for (const auto& [optimizer_name, make] : test::every_optimizer()) {
    for (const AllreduceAlgorithm algorithm : {AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd}) {
      const Trained expected = train(options(algorithm, Sharding::none), make, 1, device);
      for (const Sharding sharding : {Sharding::optimizer, Sharding::gradients, Sharding::parameters}) {
        // Stage 3 with overlap gathers the next bucket on a thread of its own.
        for (const Overlap overlap : {Overlap::on, Overlap::off}) {
          const char* const name = optimizer_name;
          CAPTURE(name);
          CAPTURE(algorithm_name(algorithm));
          CAPTURE(sharding_name(sharding));
          CAPTURE(overlap_name(overlap));
          if (over_nccl && sharding == Sharding::parameters && overlap == Overlap::on) {
            CHECK_THROWS_WITH_AS(train(options(algorithm, sharding, overlap), make, 1, device),
                                 doctest::Contains("cannot overlap"), Error);
            continue;
          }
          const Trained sharded = train(options(algorithm, sharding, overlap), make, 1, device);
          CHECK(sharded.parameters == expected.parameters);
          CHECK(sharded.buffers == expected.buffers);
          CHECK(sharded.evaluation_loss == expected.evaluation_loss);
          CHECK(std::abs(sharded.resident.optimizer - sharded.formula.optimizer) <= 3 * 4 * 2);
          CHECK(std::abs(sharded.resident.gradients - sharded.formula.gradients) <= 3 * 4);
          CHECK(std::abs(sharded.resident.parameters - sharded.formula.parameters) <= 3 * 4);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("sharding: every stage trains DataParallel's weights bit for bit with ring and rhd, for every optimizer") {
  every_stage_trains_unsharded_weights(cpu(), false);
}

TEST_CASE("sharding: with gradient accumulation every stage trains DataParallel's weights bit for bit") {
  const MakeOptimizer& adam = test::every_optimizer().back().second;
  const Trained expected = train(options(AllreduceAlgorithm::ring, Sharding::none), adam, 2);
  for (const Sharding sharding : {Sharding::optimizer, Sharding::gradients, Sharding::parameters}) {
    CAPTURE(sharding_name(sharding));
    CHECK(train(options(AllreduceAlgorithm::ring, sharding), adam, 2).parameters == expected.parameters);
  }
}

TEST_CASE("sharding: with MPI's builtin collectives the weights agree with DataParallel's to float32's reordering") {
  const Communicator world = Communicator::world();
  const MakeOptimizer& sgd = test::every_optimizer().front().second;
  const Trained builtin = train(options(AllreduceAlgorithm::builtin, Sharding::none), sgd);
  // How far two summation orders of the same gradients drift apart here:
  // MPI_Allreduce's against our ring's.
  const double reordering = max_relative_difference(
      builtin.parameters, train(options(AllreduceAlgorithm::ring, Sharding::none), sgd).parameters);
  for (const Sharding sharding : {Sharding::optimizer, Sharding::gradients, Sharding::parameters}) {
    CAPTURE(sharding_name(sharding));
    const Trained sharded = train(options(AllreduceAlgorithm::builtin, sharding), sgd);
    // MPI_Reduce_scatter may sum in another order than MPI_Allreduce, but
    // two ranks have one order only.
    if (world.size() == 2) {
      CHECK(sharded.parameters == builtin.parameters);
    } else {
      CHECK(max_relative_difference(sharded.parameters, builtin.parameters) <= 2.0 * reordering);
    }
  }
}

TEST_CASE("sharding: each rank holds the state bytes ZeRO's formula gives, its chunks adding up to the whole") {
  const Communicator world = Communicator::world();
  const std::int64_t parameters = 1030, p = world.size();
  const auto whole = [&](std::int64_t bytes) {
    std::vector<double> sum{static_cast<double>(bytes)};
    world.sum_doubles(sum);
    return static_cast<std::int64_t>(sum[0]);
  };
  for (const auto& [optimizer_name, make] : test::every_optimizer()) {
    const char* const name = optimizer_name;
    CAPTURE(name);
    const Trained unsharded = train(options(AllreduceAlgorithm::ring, Sharding::none), make);
    const std::int64_t k = unsharded.resident.optimizer / (4 * parameters);  // state values per parameter
    CHECK(unsharded.resident.optimizer == 4 * k * parameters);
    CHECK(unsharded.resident.parameters == 4 * parameters);
    CHECK(unsharded.resident.gradients == 4 * parameters);
    CHECK(unsharded.resident.total() == unsharded.formula.total());
    for (const Sharding sharding : {Sharding::optimizer, Sharding::gradients, Sharding::parameters}) {
      CAPTURE(sharding_name(sharding));
      const Trained sharded = train(options(AllreduceAlgorithm::ring, sharding), make);
      const StateBytes& held = sharded.resident;
      if (sharding == Sharding::parameters) {
        // Between steps no bucket is gathered: only the chunks.
        CHECK(whole(held.parameters) == 4 * parameters);
        CHECK(std::abs(held.parameters - sharded.formula.parameters) <= 3 * 4);
      } else {
        CHECK(held.parameters == 4 * parameters);
      }
      CHECK(whole(held.optimizer) == 4 * k * parameters);
      // Three buckets, each cut into chunks of floor or ceil(n / p).
      CHECK(std::abs(held.optimizer - sharded.formula.optimizer) <= 3 * 4 * k);
      CHECK(held.optimizer <= 4 * k * (parameters + 3 * (p - 1)) / p);
      if (sharding == Sharding::optimizer) {
        CHECK(held.gradients == 4 * parameters);
      } else {
        CHECK(whole(held.gradients) == 4 * parameters);
        CHECK(std::abs(held.gradients - sharded.formula.gradients) <= 3 * 4);
      }
    }
  }
}

namespace {

// One epoch of odd_cnn with Adam under `sharding`: the model and its strategy.
std::pair<std::shared_ptr<layers::Sequential>, std::shared_ptr<DataParallel>> one_epoch(
    Sharding sharding, Overlap overlap, std::int64_t batches_per_step = 1) {
  const Communicator world = Communicator::world();
  auto model = odd_cnn(5);
  auto strategy = std::make_shared<DataParallel>(world, options(AllreduceAlgorithm::ring, sharding, overlap));
  optim::TrainerOptions trainer_options = test::quiet_options({}, strategy);
  trainer_options.batches_per_step = batches_per_step;
  optim::Trainer trainer(model, layers::cross_entropy, test::every_optimizer().back().second(model->parameters()),
                         trainer_options);
  models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch / world.size()});
  trainer.fit(loader, {.epochs = 1});
  REQUIRE(strategy->bucket_count() == 3);
  return {model, strategy};
}

}  // namespace

TEST_CASE("sharding: a step sends what the ring's formula gives, 2(N-1) P floats over the ranks, stage 3 3(N-1) P") {
  // The ring sends each of a bucket's N chunks on N - 1 hops, in the
  // reduce-scatter and again in the allgather: (N - 1) P floats over the
  // ranks for each, whatever the chunks' sizes. Stage 3 gathers every
  // bucket twice (forward, backward) beside its reduce-scatter.
  const Communicator world = Communicator::world();
  const std::int64_t parameters = 1030, n = world.size();
  for (const Sharding sharding : {Sharding::none, Sharding::optimizer, Sharding::gradients, Sharding::parameters}) {
    for (const Overlap overlap : {Overlap::off, Overlap::on}) {
      CAPTURE(sharding_name(sharding));
      CAPTURE(overlap_name(overlap));
      const SyncStatistics statistics = one_epoch(sharding, overlap).second->statistics();
      REQUIRE(statistics.steps > 0);
      std::vector<double> sent{static_cast<double>(statistics.bytes_sent)};
      world.sum_doubles(sent);
      const std::int64_t phases = sharding == Sharding::parameters ? 3 : 2;
      CHECK(static_cast<std::int64_t>(sent[0]) == statistics.steps * phases * (n - 1) * parameters * 4);
    }
  }
}

TEST_CASE("sharding: under stage 2 a bucket exists only from its first gradient until it is reduced") {
  const auto [model, strategy] = one_epoch(Sharding::gradients, Overlap::off);
  // Reduced on the training thread as each fills: the next one's first
  // gradient may come before the last of the one before.
  CHECK(strategy->sharded_state()->peak_live_buckets() >= 1);
  CHECK(strategy->sharded_state()->peak_live_buckets() <= 2);
  for (const GradientBucket& bucket : strategy->buckets()) CHECK_FALSE(bucket.buffer.defined());
  for (const Tensor& parameter : model->parameters()) CHECK_FALSE(parameter.grad().defined());
}

namespace {

// Trains until `epochs` under `options`, from `resume_from`'s checkpoint if
// given, and saves a checkpoint at `path` (written by rank 0 of `comm`).
void train_and_save(const Communicator& comm, const DataParallelOptions& options, const std::string& path,
                    std::int64_t epochs, const std::string& resume_from = "", const Device& device = cpu()) {
  auto model = odd_cnn(5);
  model->to(device);
  optim::Trainer trainer(model, layers::cross_entropy, test::every_optimizer().back().second(model->parameters()),
                         test::quiet_options({}, std::make_shared<DataParallel>(comm, options)));
  if (!resume_from.empty()) trainer.load_checkpoint(resume_from);
  models::DataLoader loader(random_images(),
                            {.batch_size = kGlobalBatch / comm.size(), .shuffle = true, .seed = 3, .device = device});
  trainer.fit(loader, {.epochs = epochs});
  trainer.save_checkpoint(path);
  comm.barrier();
}

// Every tensor of a checkpoint file, by name, as its bytes.
std::map<std::string, std::string> checkpoint_tensors(const std::string& path) {
  std::map<std::string, std::string> tensors;
  for (const auto& [name, tensor] : optim::read_checkpoint_file(path).tensors) {
    tensors[name] = std::string(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  }
  return tensors;
}

}  // namespace

TEST_CASE("sharding: a checkpoint is DataParallel's file and resumes at another rank count as DataParallel does") {
  const Communicator world = Communicator::world();
  std::optional<test::TempDir> directory;
  const std::string unsharded = test::shared_path(world, directory, "unsharded.ckpt");
  const std::string base = std::filesystem::path(unsharded).parent_path().string();
  train_and_save(world, options(AllreduceAlgorithm::ring, Sharding::none), unsharded, 1);
  // One rank fewer (one alone at 2 ranks) resumes the file.
  const int resumers = world.size() - 1;
  const std::optional<Communicator> fewer = [&]() -> std::optional<Communicator> {
    const Communicator part = world.split(world.rank() < resumers ? 0 : 1, world.rank());
    if (world.rank() < resumers) return part;
    return std::nullopt;
  }();
  for (const Sharding sharding : {Sharding::optimizer, Sharding::gradients, Sharding::parameters}) {
    CAPTURE(sharding_name(sharding));
    const std::string name(sharding_name(sharding));
    const std::string sharded = base + "/" + name + ".ckpt";
    train_and_save(world, options(AllreduceAlgorithm::ring, sharding), sharded, 1);
    if (world.rank() == 0) CHECK(checkpoint_tensors(sharded) == checkpoint_tensors(unsharded));
    // A second epoch, sharded from the sharded file and unsharded from DataParallel's.
    if (fewer) {
      const std::string resumed_sharded = base + "/" + name + ".resumed.ckpt";
      const std::string resumed_plain = base + "/" + name + ".resumed_plain.ckpt";
      train_and_save(*fewer, options(AllreduceAlgorithm::ring, sharding), resumed_sharded, 2, sharded);
      train_and_save(*fewer, options(AllreduceAlgorithm::ring, Sharding::none), resumed_plain, 2, unsharded);
      if (fewer->rank() == 0) CHECK(checkpoint_tensors(resumed_sharded) == checkpoint_tensors(resumed_plain));
    }
    world.barrier();
  }
}

TEST_CASE("sharding parameters: each bucket is whole only around its layers, at most two at once") {
  const auto [model, strategy] = one_epoch(Sharding::parameters, Overlap::off);
  const ShardedState& shards = *strategy->sharded_state();
  CHECK(shards.peak_gathered_groups() >= 1);
  CHECK(shards.peak_gathered_groups() <= 2);
  // Between steps every bucket is released; gather_parameters makes them whole.
  for (std::size_t b = 0; b < 3; ++b) CHECK_FALSE(shards.gathered(b));
  strategy->gather_parameters();
  for (std::size_t b = 0; b < 3; ++b) CHECK(shards.gathered(b));
  CHECK(shards.peak_gathered_groups() <= 2);  // training's peak, not this gather's
  // With accumulation too: the earlier batches' backward gathers are released.
  const auto accumulated = one_epoch(Sharding::parameters, Overlap::off, 2).second;
  CHECK(accumulated->sharded_state()->peak_gathered_groups() <= 2);
}

TEST_CASE("sharding parameters: a checkpoint loaded after training is what the next save and steps see") {
  const Communicator world = Communicator::world();
  std::optional<test::TempDir> directory;
  const std::string two_epochs = test::shared_path(world, directory, "two_epochs.ckpt");
  const std::string base = std::filesystem::path(two_epochs).parent_path().string();
  train_and_save(world, options(AllreduceAlgorithm::ring, Sharding::none), two_epochs, 2);
  // Trained one epoch, then given the two-epoch state: saved at once it is
  // that state, and a third epoch from it is DataParallel's third.
  auto model = odd_cnn(9);
  auto strategy = std::make_shared<DataParallel>(world, options(AllreduceAlgorithm::ring, Sharding::parameters));
  optim::Trainer trainer(model, layers::cross_entropy, test::every_optimizer().back().second(model->parameters()),
                         test::quiet_options({}, strategy));
  models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch / world.size(), .shuffle = true, .seed = 3});
  trainer.fit(loader, {.epochs = 1});
  trainer.load_checkpoint(two_epochs);
  const std::string saved = base + "/saved.ckpt";
  trainer.save_checkpoint(saved);
  world.barrier();
  if (world.rank() == 0) CHECK(checkpoint_tensors(saved) == checkpoint_tensors(two_epochs));
  trainer.fit(loader, {.epochs = 3});
  trainer.save_checkpoint(base + "/sharded3.ckpt");
  train_and_save(world, options(AllreduceAlgorithm::ring, Sharding::none), base + "/plain3.ckpt", 3, two_epochs);
  if (world.rank() == 0)
    CHECK(checkpoint_tensors(base + "/sharded3.ckpt") == checkpoint_tensors(base + "/plain3.ckpt"));
  world.barrier();
}

TEST_CASE("sharding parameters: EarlyStopping reads the best weights whole and restores them for the next steps") {
  // Three epochs with the "best" weights restored at the end, then a fourth
  // from them: under stage 3 the callback must see whole parameters (they
  // read zeros between steps) and its writes must reach the chunks. The
  // best is the largest loss, the first epoch's, so the restore matters.
  const auto trained = [](Sharding sharding) {
    const Communicator world = Communicator::world();
    auto model = odd_cnn(5);
    auto strategy = std::make_shared<DataParallel>(world, options(AllreduceAlgorithm::ring, sharding));
    optim::Trainer trainer(model, layers::cross_entropy, test::every_optimizer().back().second(model->parameters()),
                           test::quiet_options({}, strategy));
    models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch / world.size(), .shuffle = true, .seed = 3});
    auto stopping = std::make_shared<optim::EarlyStopping>(optim::EarlyStoppingOptions{
        .monitor = "loss", .mode = optim::MonitorMode::max, .patience = 5, .restore_best_weights = true});
    trainer.fit(loader, {.epochs = 3, .callbacks = {stopping}});
    strategy->gather_parameters();
    const std::vector<float> restored = test::flat_parameters(*model);
    trainer.fit(loader, {.epochs = 4});
    strategy->gather_parameters();
    return std::pair{restored, test::flat_parameters(*model)};
  };
  const auto [restored, fourth] = trained(Sharding::none);
  const auto [sharded_restored, sharded_fourth] = trained(Sharding::parameters);
  CHECK(sharded_restored == restored);
  CHECK(sharded_fourth == fourth);
}

TEST_CASE("sharding parameters: with overlap the next bucket is gathered ahead, at most two whole at once") {
  const auto [model, strategy] = one_epoch(Sharding::parameters, Overlap::on);
  const ShardedState& shards = *strategy->sharded_state();
  const std::int64_t steps = strategy->statistics().steps;
  REQUIRE(steps == 4);
  CHECK(shards.peak_gathered_groups() == 2);
  // Of the three buckets' gathers in each forward and each backward, every
  // one but the pass's first was sent ahead by a prefetch: 4 a step.
  CHECK(shards.prefetch_hits() == 4 * steps);
}

TEST_CASE("sharding: on a GPU every stage trains DataParallel's weights and writes its file" *
          doctest::test_suite("cuda")) {
  const Communicator world = Communicator::world();
  if (!test::every_rank_has_a_gpu(world)) return test::skip("a rank has no CUDA device");
  // Ranks that share a GPU reduce and gather through host memory over MPI;
  // ranks with GPUs of their own on the GPU over NCCL (tests/parallel/gpu
  // runs these, one GPU per rank).
  const Device gpu = cuda(world.local_rank() % device_count(DeviceType::CUDA));
  every_stage_trains_unsharded_weights(gpu, test::gpus_of_their_own(world, gpu) && NcclCommunicator::built());
  std::optional<test::TempDir> directory;
  const std::string unsharded = test::shared_path(world, directory, "gpu_none.ckpt");
  const std::string base = std::filesystem::path(unsharded).parent_path().string();
  train_and_save(world, options(AllreduceAlgorithm::ring, Sharding::none), unsharded, 1, "", gpu);
  for (const Sharding sharding : {Sharding::gradients, Sharding::parameters}) {
    CAPTURE(sharding_name(sharding));
    const std::string sharded = base + "/gpu_" + std::string(sharding_name(sharding)) + ".ckpt";
    train_and_save(world, options(AllreduceAlgorithm::ring, sharding), sharded, 1, "", gpu);
    if (world.rank() == 0) CHECK(checkpoint_tensors(sharded) == checkpoint_tensors(unsharded));
  }
}

TEST_CASE("sharding: configurations it cannot serve are refused, naming what is wrong") {
  const Communicator world = Communicator::world();
  for (const AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::tree, AllreduceAlgorithm::naive, AllreduceAlgorithm::shm}) {
    CAPTURE(algorithm_name(algorithm));
    CHECK_THROWS_WITH_AS(DataParallel(world, options(algorithm, Sharding::optimizer)),
                         doctest::Contains("needs a reduce-scatter and an allgather"), Error);
  }
  DataParallelOptions half = options(AllreduceAlgorithm::ring, Sharding::gradients);
  half.fp16_compression = true;
  CHECK_THROWS_WITH_AS(DataParallel(world, half), doctest::Contains("float16 on the wire would round"), Error);
  // An optimizer over a tensor the model does not hold.
  auto model = odd_cnn(5);
  std::vector<Tensor> parameters = model->parameters();
  parameters.push_back(zeros({3}).set_requires_grad());
  optim::Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(parameters),
                         test::quiet_options({}, std::make_shared<DataParallel>(
                                                     world, options(AllreduceAlgorithm::ring, Sharding::optimizer))));
  models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch / world.size()});
  CHECK_THROWS_WITH_AS(trainer.fit(loader, {.epochs = 1}), doctest::Contains("is not one of the model's parameters"),
                       Error);
}

TEST_CASE("sharding: a model spread over two devices is refused, naming them") {
  const Communicator world = Communicator::world();
  if (device_count(DeviceType::CPU) < 2) return test::skip("one CPU device: set DDL_CPU_DEVICES=2");
  auto spread = odd_cnn(5);
  (*spread)[7].to(cpu(1));
  optim::Trainer spread_trainer(
      spread, layers::cross_entropy, std::make_shared<optim::SGD>(spread->parameters()),
      test::quiet_options(
          {}, std::make_shared<DataParallel>(world, options(AllreduceAlgorithm::ring, Sharding::gradients))));
  models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch / world.size()});
  CHECK(test::throws_error_mentioning([&] { spread_trainer.fit(loader, {.epochs = 1}); },
                                      {"cpu:0", "cpu:1", "the model on one device"}));
}

TEST_CASE("sharding: in a hybrid, each stage's state sharded over its pipelines trains and saves the unsharded bits") {
  const Communicator world = Communicator::world();
  std::optional<test::TempDir> directory;
  const std::string base = std::filesystem::path(test::shared_path(world, directory, "x")).parent_path().string();
  const MakeOptimizer& adam = test::every_optimizer().back().second;
  for (int data_parallel = 2; data_parallel <= world.size(); ++data_parallel) {
    if (world.size() % data_parallel != 0) continue;
    const int stages = world.size() / data_parallel;
    CAPTURE(data_parallel);
    const ProcessGrid grid = ProcessGrid::split(world, data_parallel, stages);
    // This rank's stage after `epochs`, from `resume`'s checkpoint if given,
    // and the checkpoint it then took part in.
    const auto train_hybrid = [&](Sharding sharding, std::int64_t epochs, const std::string& resume) {
      const layers::LayerList list = test::small_cnn_layers();
      auto pipeline =
          std::make_shared<Pipeline>(grid, balanced_split(std::vector<double>(list.size(), 1.0), stages),
                                     PipelineOptions{.micro_batches = 2, .bucket_bytes = 256, .sharding = sharding});
      Generator generator(5);
      auto model = build_stage(list, *pipeline, &generator);
      optim::Trainer trainer(model, layers::cross_entropy, adam(model->parameters()),
                             test::quiet_options({}, pipeline));
      if (!resume.empty()) trainer.load_checkpoint(resume);
      models::DataLoader data(random_images(),
                              {.batch_size = kGlobalBatch / data_parallel, .shuffle = true, .seed = 3});
      trainer.fit(data, {.epochs = epochs});
      const std::string path =
          fmt::format("{}/hybrid_{}_{}_{}.ckpt", base, data_parallel, sharding_name(sharding), epochs);
      trainer.save_checkpoint(path);
      world.barrier();
      return std::make_pair(test::flat_parameters(*model), path);
    };
    const auto [expected, unsharded_file] = train_hybrid(Sharding::none, 2, "");
    const auto [resumed_expected, resumed_file] = train_hybrid(Sharding::none, 3, unsharded_file);
    for (const Sharding sharding : {Sharding::optimizer, Sharding::gradients}) {
      CAPTURE(sharding_name(sharding));
      const auto [trained, file] = train_hybrid(sharding, 2, "");
      CHECK(trained == expected);
      if (world.rank() == 0) CHECK(checkpoint_tensors(file) == checkpoint_tensors(unsharded_file));
      // A third epoch, resumed from the sharded run's file.
      CHECK(train_hybrid(sharding, 3, file).first == resumed_expected);
    }
  }
  // One pipeline has no data-parallel group to shard over.
  CHECK_THROWS_WITH_AS(Pipeline(world, balanced_split(std::vector<double>(7, 1.0), world.size()),
                                PipelineOptions{.sharding = Sharding::optimizer}),
                       doctest::Contains("there is only one pipeline"), Error);
}
