// DataParallel (parallel/strategies/data_parallel.hpp) under mpiexec with 2, 3 and 4
// ranks. The central property: N ranks, each with per-rank batch B/N of an
// interleaved shard, take the same steps as one process with batch B, for
// every allreduce algorithm, with and without overlap, with several buckets.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include <ddl/ddl.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/gradient_buckets.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

using ddl::test::kGlobalBatch;
using ddl::test::MakeOptimizer;
using ddl::test::max_relative_difference;
using ddl::test::random_images;
using ddl::test::small_cnn;
using ddl::test::train;

TEST_CASE("DataParallel: N ranks at batch B/N train the weights of 1 process at batch B, for every algorithm") {
  const Communicator world = Communicator::world();
  const std::vector<std::pair<const char*, MakeOptimizer>> optimizers{
      {"SGD with momentum", test::sgd_with_momentum()},
      {"Adadelta", [](std::vector<Tensor> p) { return std::make_shared<optim::Adadelta>(std::move(p)); }},
  };
  for (const auto& optimizer : optimizers) {
    // Named, not bound: CAPTURE's lambda captures no structured binding
    // before clang 16 (the sanitizer builds use clang 14).
    const char* const optimizer_name = optimizer.first;
    const MakeOptimizer& make = optimizer.second;
    const std::vector<float> reference = train(nullptr, kGlobalBatch, make, 5);
    for (const AllreduceAlgorithm algorithm : all_allreduce_algorithms()) {
      for (const bool overlap : {true, false}) {
        CAPTURE(optimizer_name);
        CAPTURE(algorithm_name(algorithm));
        CAPTURE(overlap);
        // The Dense bias alone (a first bucket of 32 bytes), its weight, then the convolution's.
        auto strategy =
            std::make_shared<DataParallel>(world, DataParallelOptions{.algorithm = algorithm,
                                                                      .bucket_bytes = 1024,
                                                                      .first_bucket_bytes = 32,
                                                                      .overlap = overlap ? Overlap::on : Overlap::off});
        // Every rank starts from different weights: prepare() must broadcast rank 0's.
        const auto trained = train(strategy, kGlobalBatch / world.size(), make, 5 + 100 * world.rank());
        CHECK(strategy->bucket_count() >= 3);
        CHECK(strategy->overlapping() == overlap);
        CHECK(max_relative_difference(trained, reference) <= 1e-5);
      }
    }
  }
}

TEST_CASE("DataParallel: a model on a GPU trains as on the CPU with every algorithm of ours, its buckets staged" *
          doctest::test_suite("cuda")) {
  const Communicator world = Communicator::world();
  if (!test::every_rank_has_a_gpu(world)) return test::skip("a rank has no CUDA device");
  // Ranks that share a GPU reduce a host copy of each GPU bucket over MPI;
  // ranks with GPUs of their own reduce on the GPU over NCCL (and so do
  // tests/parallel/gpu, on one GPU per rank).
  const Device gpu = cuda(world.local_rank() % device_count(DeviceType::CUDA));
  const bool own_gpus = test::gpus_of_their_own(world, gpu);
  const std::int64_t batch = kGlobalBatch / world.size();
  const std::uint64_t seed = 5 + 100 * static_cast<std::uint64_t>(world.rank());
  const DataParallelOptions ring{.algorithm = AllreduceAlgorithm::ring, .bucket_bytes = 1024, .first_bucket_bytes = 32};
  const std::vector<float> on_cpu =
      train(std::make_shared<DataParallel>(world, ring), batch, test::sgd_with_momentum(), seed);
  for (const AllreduceAlgorithm algorithm : all_allreduce_algorithms()) {
    CAPTURE(algorithm_name(algorithm));
    auto strategy = std::make_shared<DataParallel>(
        world, DataParallelOptions{.algorithm = algorithm, .bucket_bytes = 1024, .first_bucket_bytes = 32});
    // cuDNN's and Eigen's sums differ in order: the runs agree to rounding.
    CHECK(max_relative_difference(train(strategy, batch, test::sgd_with_momentum(), seed, gpu), on_cpu) <= 1e-4);
    CHECK(strategy->bucket_count() >= 3);
    CHECK(strategy->reduces_on_gpu() == (own_gpus && NcclCommunicator::built() && runs_on_gpu(algorithm)));
    for (const GradientBucket& bucket : strategy->buckets()) {
      CHECK(bucket.buffer.device() == gpu);  // the gradients are views into it, on the GPU
      for (const BucketEntry& entry : bucket.entries) CHECK(entry.in_buffer(entry.parameter.grad()));
    }
  }
}

TEST_CASE("DataParallel: a model without parameters prepares, steps and synchronises with no buckets") {
  // What a hybrid pipeline's stage of activations and pooling alone does
  // through its DataParallel.
  const Communicator world = Communicator::world();
  auto model = std::make_shared<layers::Sequential>();
  model->emplace<layers::ReLU>().emplace<layers::MaxPool2d>();
  DataParallel strategy(world);
  strategy.prepare(*model, nullptr);
  for (int step = 0; step < 2; ++step) {
    strategy.begin_step(*model);
    strategy.expect_final_gradients();
    strategy.synchronize_gradients(*model);
  }
  CHECK(strategy.bucket_count() == 0);
  CHECK_FALSE(strategy.overlapping());
}

TEST_CASE("DataParallel: accumulating 2 batches of B/2N per step trains the weights of 1 process at batch B") {
  // Gradients are reduced only during each step's last backward (DDP's
  // no_sync): with overlap, a bucket sent after the first backward would
  // be refused when the second adds to it.
  const Communicator world = Communicator::world();
  const std::vector<float> reference = train(nullptr, 2 * kGlobalBatch, test::sgd_with_momentum(), 5);
  for (const bool overlap : {true, false}) {
    CAPTURE(overlap);
    auto strategy = std::make_shared<DataParallel>(
        world, DataParallelOptions{.bucket_bytes = 1024, .overlap = overlap ? Overlap::on : Overlap::off});
    const auto trained = train(strategy, kGlobalBatch / world.size(), test::sgd_with_momentum(), 5 + 100 * world.rank(),
                               cpu(), /*batches_per_step=*/2);
    CHECK(strategy->overlapping() == overlap);
    CHECK(strategy->statistics().steps == 4);  // 48 samples, 24 per step, 2 epochs
    CHECK(max_relative_difference(trained, reference) <= 1e-5);
  }
}

TEST_CASE("DataParallel: gradients that fit one bucket are reduced on the training thread, with the same result") {
  const Communicator world = Communicator::world();
  const MakeOptimizer make = [](std::vector<Tensor> p) { return std::make_shared<optim::Adadelta>(std::move(p)); };
  const std::vector<float> reference = train(nullptr, kGlobalBatch, make, 5);
  auto strategy = std::make_shared<DataParallel>(world, DataParallelOptions{.overlap = Overlap::on});
  const auto trained = train(strategy, kGlobalBatch / world.size(), make, 5 + 100 * world.rank());
  CHECK(strategy->bucket_count() == 1);
  CHECK_FALSE(strategy->overlapping());
  CHECK(max_relative_difference(trained, reference) <= 1e-5);
}

TEST_CASE("DataParallel: with fp16 compression the ranks stay identical and close to full-precision training") {
  const Communicator world = Communicator::world();
  const MakeOptimizer make = [](std::vector<Tensor> p) {
    return std::make_shared<optim::SGD>(std::move(p), optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
  };
  const auto reference = train(nullptr, kGlobalBatch, make, 5);
  auto strategy =
      std::make_shared<DataParallel>(world, DataParallelOptions{.bucket_bytes = 1024, .fp16_compression = true});
  const auto trained = train(strategy, kGlobalBatch / world.size(), make, 5);
  // Each averaged gradient is off by at most p^2 · 2^-11 of its size (the
  // ring's roundings, see test_collectives), so the training's movement of
  // the weights, ||reference - initial||, is off by about that fraction
  // (twice that, for the effect of one step's error on the next gradients).
  const auto initial = test::flat_parameters(*test::small_cnn(5));
  double moved = 0.0, off = 0.0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    moved += std::pow(static_cast<double>(reference[i]) - initial[i], 2);
    off += std::pow(static_cast<double>(trained[i]) - reference[i], 2);
  }
  const double p = world.size();
  CAPTURE(std::sqrt(off / moved));
  CHECK(std::sqrt(off) <= 2.0 * p * p / 2048.0 * std::sqrt(moved));
  CHECK(off > 0.0);  // the wire really was float16
  const auto all = world.allgather_bytes(std::as_bytes(std::span<const float>(trained)));
  for (int r = 0; r < world.size(); ++r) {
    CHECK(std::memcmp(all.data() + r * trained.size() * sizeof(float), trained.data(),
                      trained.size() * sizeof(float)) == 0);
  }
  CHECK(test::throws_error_mentioning(
      [&] {
        DataParallel(world, DataParallelOptions{.algorithm = AllreduceAlgorithm::tree, .fp16_compression = true});
      },
      {"fp16", "ring", "tree"}));
}

TEST_CASE("DataParallel: evaluate averages over every rank's shard like one process over all samples, each once") {
  const Communicator world = Communicator::world();
  auto model = small_cnn(9);
  optim::Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()),
                         test::quiet_options({optim::Metric::accuracy}, std::make_shared<DataParallel>(world)));
  // 47 samples: the shards of 2, 3 and 4 ranks end in padding, which no
  // metric may count.
  const models::Dataset all = random_images();
  const models::Dataset data{slice(all.inputs, 0, 47), slice(all.targets, 0, 47)};
  models::DataLoader loader(data, {.batch_size = 5});
  const optim::Logs logs = trainer.evaluate(loader);

  model->eval();
  const Tensor logits = (*model)(data.inputs);
  CHECK(logs.at("loss") == doctest::Approx(layers::cross_entropy(logits, data.targets).item()).epsilon(1e-5));
  const std::vector<float> scores = logits.to_vector<float>();
  const std::vector<std::int64_t> labels = data.targets.to_vector<std::int64_t>();
  double correct = 0.0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const float* row = scores.data() + i * 10;
    correct += static_cast<double>(std::max_element(row, row + 10) - row == labels[i]);
  }
  CHECK(logs.at("accuracy") == doctest::Approx(correct / 47.0).epsilon(1e-12));
}

TEST_CASE("DataParallel: a checkpoint taken mid-epoch resumes bit for bit, the ranks' metrics included") {
  const Communicator world = Communicator::world();
  std::optional<test::TempDir> directory;
  const std::string path = test::shared_path(world, directory, "last.ckpt");
  const auto every_3_steps = std::make_shared<optim::ModelCheckpoint>(optim::ModelCheckpointOptions{
      .directory = std::filesystem::path(path).parent_path().string(), .save_best = false, .every_steps = 3});
  const auto run = [&](std::vector<std::shared_ptr<optim::Callback>> callbacks, bool resume) {
    auto model = small_cnn(5);
    optim::Trainer trainer(model, layers::cross_entropy, test::sgd_with_momentum()(model->parameters()),
                           test::quiet_options({optim::Metric::accuracy}, std::make_shared<DataParallel>(world)));
    if (resume) trainer.load_checkpoint(path);
    // 47 samples: the last batch of a shard holds padding.
    const models::Dataset all = random_images();
    models::DataLoader loader({slice(all.inputs, 0, 47), slice(all.targets, 0, 47)},
                              {.batch_size = kGlobalBatch / world.size(), .shuffle = true, .seed = 3});
    optim::History history;
    try {
      history = trainer.fit(loader, {.epochs = 2, .callbacks = std::move(callbacks)});
    } catch (const test::StopAt::Stopped&) {
      CHECK_FALSE(resume);
    }
    return std::make_pair(test::flat_parameters(*model), history);
  };
  const auto [expected, uninterrupted] = run({}, false);
  // 4 steps per epoch: saved after the sixth (2 into epoch 2), stopped before the seventh.
  (void)run({every_3_steps, std::make_shared<test::StopAt>(6)}, false);
  world.barrier();
  const auto [resumed, rest] = run({}, true);
  CHECK(resumed == expected);
  REQUIRE(rest.epochs.size() == 1);
  for (const char* name : {"loss", "accuracy"}) {
    CAPTURE(name);
    CHECK(rest.epochs[0].at(name) == uninterrupted.epochs[1].at(name));
  }
  world.barrier();
}

namespace {

// Dense 144-10 on cpu:0, then Dense 10-10 on `second` (cpu:1: each bucket
// holds parameters of both devices, so cpu:1's gradients take the copying
// path while cpu:0's are views into the buckets).
class TwoDeviceMlp : public layers::Module {
 public:
  TwoDeviceMlp(std::uint64_t seed, Device second) : second_device_(second) {
    Generator generator(seed);
    first_ = register_module("0", std::make_shared<layers::Dense>(144, 10, true, &generator));
    second_ = register_module("1", std::make_shared<layers::Dense>(10, 10, true, &generator));
    second_->to(second);
  }
  Tensor forward(const Tensor& input) override {
    return (*second_)((*first_)(input.flatten(1)).to(second_device_)).to(cpu(0));
  }
  std::string type_name() const override { return "TwoDeviceMlp"; }

 private:
  Device second_device_;
  std::shared_ptr<layers::Dense> first_, second_;
};

std::vector<float> train_two_device_mlp(std::shared_ptr<optim::Strategy> strategy, std::int64_t batch, Device second) {
  auto model = std::make_shared<TwoDeviceMlp>(7, second);
  optim::Trainer trainer(
      model, layers::cross_entropy,
      std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.05, .momentum = 0.9}),
      test::quiet_options({}, std::move(strategy)));
  models::DataLoader loader(random_images(), {.batch_size = batch, .shuffle = true, .seed = 3});
  trainer.fit(loader, {.epochs = 2});
  return test::flat_parameters(*model);
}

}  // namespace

TEST_CASE("DataParallel: gradients live in the buckets, parameters on another device are copied in and out") {
  const Communicator world = Communicator::world();
  // Copying a gradient in and out changes no bit, so the model spread over
  // two devices trains exactly as the same model on cpu:0 alone, whose
  // gradients are all views (the view path itself is checked against
  // 1-process training above).
  for (const bool overlap : {true, false}) {
    CAPTURE(overlap);
    // The second Dense and the first's bias (480 bytes) in the first
    // bucket: parameters of two devices in one bucket.
    const DataParallelOptions options{
        .bucket_bytes = 512, .first_bucket_bytes = 480, .overlap = overlap ? Overlap::on : Overlap::off};
    const std::int64_t batch = kGlobalBatch / world.size();
    CHECK(train_two_device_mlp(std::make_shared<DataParallel>(world, options), batch, cpu(1)) ==
          train_two_device_mlp(std::make_shared<DataParallel>(world, options), batch, cpu(0)));
  }

  // After training, every gradient on the buckets' device is its view, holding the averaged values.
  auto model = std::make_shared<TwoDeviceMlp>(7, cpu(1));
  auto strategy =
      std::make_shared<DataParallel>(world, DataParallelOptions{.bucket_bytes = 512, .first_bucket_bytes = 480});
  optim::Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()),
                         test::quiet_options({}, strategy));
  models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch / world.size()});
  trainer.fit(loader, {.epochs = 1});
  REQUIRE(strategy->bucket_count() >= 2);
  int views = 0, copies = 0;
  for (const GradientBucket& bucket : strategy->buckets()) {
    for (const BucketEntry& entry : bucket.entries) {
      CAPTURE(entry.name);
      const Tensor grad = entry.parameter.grad();
      REQUIRE(grad.defined());
      const bool on_bucket_device = entry.parameter.device() == bucket.buffer.device();
      CHECK(entry.in_buffer(grad) == on_bucket_device);
      CHECK(grad.to(cpu()).to_vector<float>() ==
            bucket.buffer.flat_slice(entry.offset, entry.parameter.shape()).to_vector<float>());
      ++(on_bucket_device ? views : copies);
    }
  }
  CHECK(views > 0);
  CHECK(copies > 0);
}

namespace {

// Dense 144-10, then a pass-through whose backward throws while `fail` is
// set, then ReLU and Dense 10-10: backward has handed the last Dense's
// bucket to the communication thread when it throws.
class FailingMlp : public layers::Module {
 public:
  explicit FailingMlp(std::uint64_t seed) {
    Generator generator(seed);
    first_ = register_module("0", std::make_shared<layers::Dense>(144, 10, true, &generator));
    second_ = register_module("1", std::make_shared<layers::Dense>(10, 10, true, &generator));
  }
  Tensor forward(const Tensor& input) override {
    const Tensor hidden = (*first_)(input.flatten(1));
    Tensor passed = hidden.detach();
    autograd::record("FailingBackward", {&hidden}, passed, [this](const Tensor& grad) {
      if (fail) throw Error("FailingMlp: backward failed on purpose");
      return std::vector{grad};
    });
    return (*second_)(relu(passed));
  }
  std::string type_name() const override { return "FailingMlp"; }

  bool fail = false;

 private:
  std::shared_ptr<layers::Dense> first_, second_;
};

}  // namespace

// A user may catch a failed step (out of memory in backward, say) and go on:
// the communication thread may still be reducing a bucket of that step when
// the next begins, and must be done with it first.
TEST_CASE("DataParallel: after a step that failed in backward, training goes on as if it had never started") {
  const Communicator world = Communicator::world();
  // The second Dense's 440 bytes in a bucket of their own, reduced on the
  // communication thread.
  const DataParallelOptions options{.bucket_bytes = 512, .first_bucket_bytes = 440, .overlap = Overlap::on};
  const auto fit = [&](const std::shared_ptr<FailingMlp>& model, const std::shared_ptr<DataParallel>& strategy,
                       std::optional<optim::Trainer>& trainer) {
    if (!trainer) {
      trainer.emplace(model, layers::cross_entropy,
                      std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.05, .momentum = 0.9}),
                      test::quiet_options({}, strategy));
    }
    models::DataLoader loader(random_images(), {.batch_size = kGlobalBatch / world.size(), .shuffle = true, .seed = 3});
    trainer->fit(loader, {.epochs = 1});
  };
  const auto reference_model = std::make_shared<FailingMlp>(7);
  std::optional<optim::Trainer> reference;
  fit(reference_model, std::make_shared<DataParallel>(world, options), reference);

  const auto model = std::make_shared<FailingMlp>(7);
  const auto strategy = std::make_shared<DataParallel>(world, options);
  std::optional<optim::Trainer> trainer;
  for (int attempt = 0; attempt < 3; ++attempt) {
    model->fail = true;
    CHECK(test::throws_error_mentioning([&] { fit(model, strategy, trainer); }, {"failed on purpose"}));
  }
  REQUIRE(strategy->overlapping());
  model->fail = false;
  fit(model, strategy, trainer);
  CHECK(test::flat_parameters(*model) == test::flat_parameters(*reference_model));
}

TEST_CASE("DataParallel: a bucket lives on its parameters' CPU device and gives each of them a view") {
  const Tensor a = zeros({3, 2}, {DType::Float32, cpu(1), true});
  const Tensor b = zeros({5}, {DType::Float32, cpu(1), true});
  const Tensor c = zeros({4}, {DType::Float32, cpu(0), true});

  const auto same = make_buckets({{"a", a}, {"b", b}}, {});
  REQUIRE(same.size() == 1);
  CHECK(same[0].buffer.device() == cpu(1));
  for (const BucketEntry& entry : same[0].entries) {
    CAPTURE(entry.name);
    REQUIRE(entry.view.defined());
    CHECK(entry.view.shape() == entry.parameter.shape());
    CHECK(entry.view.data<float>() == same[0].data() + entry.offset);
    CHECK(entry.in_buffer(entry.view));
    CHECK(!entry.in_buffer(entry.parameter));
  }

  const auto mixed = make_buckets({{"a", a}, {"c", c}}, {});
  REQUIRE(mixed.size() == 1);
  CHECK(mixed[0].buffer.device() == cpu(0));
  CHECK(mixed[0].entries[0].name == "c");
  CHECK(mixed[0].entries[0].view.defined());
  CHECK(!mixed[0].entries[1].view.defined());  // a, on cpu:1
}

TEST_CASE("DataParallel: buckets take parameters from the last until they hold their limit, the first one's own") {
  auto model = small_cnn(1);  // 0.weight 144 B, 0.bias 16 B, 4.weight 4000 B, 4.bias 40 B
  const auto names = [](const GradientBucket& bucket) {
    std::vector<std::string> entries;
    for (const BucketEntry& entry : bucket.entries) entries.push_back(entry.name);
    return entries;
  };
  // The parameter that reaches the limit closes its bucket, as in PyTorch DDP.
  const auto two = make_buckets(model->named_parameters(), {.first_bytes = 1024, .bytes = 1024});
  REQUIRE(two.size() == 2);
  CHECK(names(two[0]) == std::vector<std::string>{"4.bias", "4.weight"});
  CHECK(names(two[1]) == std::vector<std::string>{"0.bias", "0.weight"});
  CHECK(two[1].entries[1].offset == 4);
  CHECK(two[1].size() == 40);
  // A first bucket smaller than the last layer's bias holds it alone.
  const auto three = make_buckets(model->named_parameters(), {.first_bytes = 32, .bytes = 1024});
  REQUIRE(three.size() == 3);
  CHECK(names(three[0]) == std::vector<std::string>{"4.bias"});
  CHECK(names(three[1]) == std::vector<std::string>{"4.weight"});
  CHECK(names(three[2]) == std::vector<std::string>{"0.bias", "0.weight"});
  // Exactly at the limit closes too: 40 + 4000 bytes; a byte more, and 0.bias joins.
  CHECK(make_buckets(model->named_parameters(), {.first_bytes = 4040, .bytes = 1 << 20})[0].entries.size() == 2);
  CHECK(make_buckets(model->named_parameters(), {.first_bytes = 4041, .bytes = 1 << 20})[0].entries.size() == 3);
  CHECK(make_buckets(model->named_parameters(), {.first_bytes = 1 << 20, .bytes = 1 << 20}).size() == 1);
  CHECK(test::throws_error_mentioning(
      [&] { make_buckets(model->named_parameters(), {.first_bytes = 0, .bytes = 1024}); }, {"sizes must be positive"}));
}

TEST_CASE("DataParallel: the bundled CNN's gradients make two buckets by default, the dense layers' reduced first") {
  // 1 MiB first (PyTorch DDP's), then 25 MiB: the last Dense and the 4.7 MB
  // Dense weight fill the first, which is reduced while the convolutions'
  // backward runs; the convolutions make the second.
  const Communicator world = Communicator::world();
  auto model = models::mnist_cnn();
  auto strategy = std::make_shared<DataParallel>(world);
  strategy->prepare(*model, nullptr);
  REQUIRE(strategy->bucket_count() == 2);
  // Overlapped where a core is left free for the communication thread.
  const int busy = world.local_size() * config::num_threads();
  CHECK(strategy->overlapping() == (busy < config::available_cpus()));
  CHECK(strategy->overlap_reason().find("automatic") != std::string::npos);
  std::vector<std::string> first;
  for (const BucketEntry& entry : strategy->buckets()[0].entries) first.push_back(entry.name);
  CHECK(first.size() == 4);  // both Dense layers' weights and biases
  for (const BucketEntry& entry : strategy->buckets()[1].entries) CHECK(entry.parameter.dim() != 2);
}
