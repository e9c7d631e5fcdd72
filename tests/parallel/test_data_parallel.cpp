// DataParallel (parallel/data_parallel.hpp) under mpiexec with 2, 3 and 4
// ranks. The central property: N ranks, each with per-rank batch B/N of an
// interleaved shard, take the same steps as one process with batch B, for
// every allreduce algorithm, with and without overlap, with several buckets.
#include <doctest/doctest.h>

#include <cmath>

#include <ddl/ddl.hpp>
#include <ddl/parallel/data_parallel.hpp>
#include <ddl/parallel/gradient_buckets.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

namespace {

constexpr std::int64_t kSamples = 48;  // divisible by 2, 3 and 4 ranks, and by the batch
constexpr std::int64_t kGlobalBatch = 12;

// A small CNN without dropout: Conv 1-4 3x3, ReLU, MaxPool 2, Flatten, Dense 100-10.
std::shared_ptr<layers::Sequential> small_cnn(std::uint64_t seed) {
  Generator generator(seed);
  auto model = std::make_shared<layers::Sequential>();
  model->emplace<layers::Conv2d>(1, 4, layers::Conv2dOptions{}, &generator)
      .emplace<layers::ReLU>()
      .emplace<layers::MaxPool2d>()
      .emplace<layers::Flatten>()
      .emplace<layers::Dense>(100, 10, true, &generator);
  return model;
}

models::Dataset random_images() {
  Generator generator(42);
  const Tensor inputs = uniform({kSamples, 1, 12, 12}, 0.0f, 1.0f, {}, &generator);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < kSamples; ++i) labels.push_back((i * 7) % 10);
  return {inputs, from_vector(labels, {kSamples})};
}

using MakeOptimizer = std::function<std::shared_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Trains 2 epochs and returns the flattened parameters.
std::vector<float> train(std::shared_ptr<optim::Strategy> strategy, std::int64_t batch, const MakeOptimizer& make,
                         std::uint64_t init_seed) {
  auto model = small_cnn(init_seed);
  optim::TrainerOptions options;
  options.verbosity = optim::Verbosity::quiet;
  options.strategy = std::move(strategy);
  optim::Trainer trainer(model, layers::cross_entropy, make(model->parameters()), options);
  models::DataLoader loader(random_images(), {.batch_size = batch, .shuffle = true, .seed = 3});
  trainer.fit(loader, {.epochs = 2});
  std::vector<float> values;
  for (const auto& [name, tensor] : model->named_parameters()) {
    const auto part = tensor.to_vector<float>();
    values.insert(values.end(), part.begin(), part.end());
  }
  return values;
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1e-3, std::abs(double{b[i]})));
  }
  return worst;
}

}  // namespace

TEST_CASE("DataParallel: N ranks at batch B/N train the weights of 1 process at batch B, for every algorithm") {
  const Communicator world = Communicator::world();
  const std::vector<std::pair<const char*, MakeOptimizer>> optimizers{
      {"SGD with momentum",
       [](std::vector<Tensor> p) {
         return std::make_shared<optim::SGD>(std::move(p), optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
       }},
      {"Adadelta", [](std::vector<Tensor> p) { return std::make_shared<optim::Adadelta>(std::move(p)); }},
  };
  for (const auto& [optimizer_name, make] : optimizers) {
    const std::vector<float> reference = train(nullptr, kGlobalBatch, make, 5);
    for (const AllreduceAlgorithm algorithm : all_allreduce_algorithms()) {
      for (const bool overlap : {true, false}) {
        CAPTURE(optimizer_name);
        CAPTURE(algorithm_name(algorithm));
        CAPTURE(overlap);
        // 1 KiB buckets: the Dense weight alone, then several small ones.
        auto strategy = std::make_shared<DataParallel>(
            world, DataParallelOptions{.algorithm = algorithm, .bucket_bytes = 1024, .overlap = overlap});
        // Every rank starts from different weights: prepare() must broadcast rank 0's.
        const auto trained = train(strategy, kGlobalBatch / world.size(), make, 5 + 100 * world.rank());
        CHECK(strategy->bucket_count() >= 3);
        CHECK(max_relative_difference(trained, reference) <= 1e-5);
      }
    }
  }
}

TEST_CASE("DataParallel: evaluate averages over every rank's shard like one process over all samples") {
  const Communicator world = Communicator::world();
  auto model = small_cnn(9);
  optim::TrainerOptions options;
  options.verbosity = optim::Verbosity::quiet;
  options.metrics = {optim::Metric::accuracy};
  options.strategy = std::make_shared<DataParallel>(world);
  optim::Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()), options);
  models::DataLoader loader(random_images(), {.batch_size = 5});
  const optim::Logs logs = trainer.evaluate(loader);

  const models::Dataset data = random_images();
  model->eval();
  const Tensor logits = (*model)(data.inputs);
  CHECK(logs.at("loss") == doctest::Approx(layers::cross_entropy(logits, data.targets).item()).epsilon(1e-5));
}

TEST_CASE("DataParallel: buckets take parameters from the last, each within the threshold unless alone") {
  auto model = small_cnn(1);  // 0.weight 144 B, 0.bias 16 B, 4.weight 4000 B, 4.bias 40 B
  const auto buckets = make_buckets(model->named_parameters(), 1024);
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].entries.size() == 1);
  CHECK(buckets[0].entries[0].name == "4.bias");
  CHECK(buckets[1].entries[0].name == "4.weight");
  CHECK(buckets[2].entries.size() == 2);
  CHECK(buckets[2].entries[0].name == "0.bias");
  CHECK(buckets[2].entries[1].offset == 4);
  CHECK(buckets[2].buffer.size() == 40);
}
