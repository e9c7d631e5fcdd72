// ParameterServer (parallel/strategies/parameter_server.hpp) under mpiexec with 2, 3
// and 4 ranks: synchronous mode takes exactly the steps of one process with
// the global batch (and so of allreduce data parallelism); asynchronous
// mode learns, and no worker runs more than max_staleness pushes ahead of
// the slowest (but as far as that when the slowest holds back); bad
// configurations are errors.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include <ddl/ddl.hpp>
#include <ddl/parallel/strategies/parameter_server.hpp>

#include "optim/engine/engine_fixtures.hpp"
#include "parallel/training_fixtures.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

namespace {

// Whether `workers` split the global batch and the samples evenly, as the
// cases comparing against one process need; else the case is skipped,
// saying why.
bool workers_split_evenly(int workers) {
  if (test::kGlobalBatch % workers == 0 && test::kSamples % workers == 0) return true;
  test::skip(fmt::format("{} workers do not divide the batch of {} and the {} samples", workers, test::kGlobalBatch,
                         test::kSamples));
  return false;
}

}  // namespace

TEST_CASE("ParameterServer: synchronous, W workers at batch B/W train the weights of 1 process at batch B") {
  const Communicator world = Communicator::world();
  const test::MakeOptimizer make = [](std::vector<Tensor> p) {
    return std::make_shared<optim::SGD>(std::move(p), optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
  };
  const auto reference = test::train(nullptr, test::kGlobalBatch, make, 5);
  for (int servers = 1; servers <= std::min(2, world.size() - 1); ++servers) {
    const int workers = world.size() - servers;
    if (test::kGlobalBatch % workers != 0 || test::kSamples % workers != 0) continue;
    CAPTURE(servers);
    auto strategy = std::make_shared<ParameterServer>(world, ParameterServerOptions{.servers = servers});
    CHECK(strategy->is_server() == (world.rank() >= workers));
    const auto trained = test::train(strategy, test::kGlobalBatch / workers, make, 5 + 100 * world.rank());
    if (!strategy->is_server()) CHECK(test::max_relative_difference(trained, reference) <= 1e-5);
  }
}

TEST_CASE("ParameterServer: workers accumulating 2 batches per step train the weights of 1 process at batch 2B") {
  // Servers step once per accumulated step: as many empty batches as the
  // workers read, one update.
  const Communicator world = Communicator::world();
  const int workers = world.size() - 1;
  if (!workers_split_evenly(workers)) return;
  const auto reference = test::train(nullptr, 2 * test::kGlobalBatch, test::sgd_with_momentum(), 5);
  auto strategy = std::make_shared<ParameterServer>(world, ParameterServerOptions{.servers = 1});
  const auto trained = test::train(strategy, test::kGlobalBatch / workers, test::sgd_with_momentum(),
                                   5 + 100 * world.rank(), cpu(), /*batches_per_step=*/2);
  if (!strategy->is_server()) CHECK(test::max_relative_difference(trained, reference) <= 1e-5);
}

TEST_CASE("ParameterServer: a checkpoint holds the servers' optimizer state, so a resumed run goes on exactly") {
  const Communicator world = Communicator::world();
  const int servers = 1, workers = world.size() - servers;
  if (!workers_split_evenly(workers)) return;
  const auto trainer_for = [&](std::shared_ptr<layers::Sequential> model) {
    return optim::Trainer(
        model, layers::cross_entropy,
        std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.05, .momentum = 0.9}),
        test::quiet_options({}, std::make_shared<ParameterServer>(world, ParameterServerOptions{.servers = servers})));
  };
  models::DataLoader loader(test::random_images(),
                            {.batch_size = test::kGlobalBatch / workers, .shuffle = true, .seed = 3});

  auto straight = test::small_cnn(5);
  trainer_for(straight).fit(loader, {.epochs = 3});

  // Rank 0 writes the checkpoint in its own directory and tells the others where.
  std::optional<test::TempDir> directory;
  std::array<char, 512> path{};
  if (world.rank() == 0) {
    directory.emplace("ps_checkpoint");
    const std::string file = directory->file("epoch1.ddl");
    REQUIRE(file.size() < path.size());
    std::memcpy(path.data(), file.c_str(), file.size());
  }
  world.broadcast_bytes(std::as_writable_bytes(std::span<char>(path)), 0);
  {
    auto first = test::small_cnn(5);
    optim::Trainer trainer = trainer_for(first);
    trainer.fit(loader, {.epochs = 1});
    trainer.save_checkpoint(path.data());  // on every rank: the servers send their state
  }
  world.barrier();
  auto resumed = test::small_cnn(77);  // other weights: the checkpoint must bring them
  optim::Trainer trainer = trainer_for(resumed);
  trainer.load_checkpoint(path.data());
  trainer.fit(loader, {.epochs = 3});
  if (world.rank() < workers) CHECK(test::flat_parameters(*resumed) == test::flat_parameters(*straight));
  world.barrier();  // rank 0 removes the directory only after everyone has read the file
}

TEST_CASE("ParameterServer: asynchronous with bounded staleness learns a separable problem") {
  const Communicator world = Communicator::world();
  const auto data = test::make_blobs(120, 4);
  auto model = test::make_classifier(3, /*dropout=*/false);
  const auto strategy = std::make_shared<ParameterServer>(
      world, ParameterServerOptions{.servers = 1, .asynchronous = true, .max_staleness = 1});
  const auto options = test::quiet_options({optim::Metric::accuracy}, strategy);
  optim::Trainer trainer(model, layers::cross_entropy,
                         std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.lr = 0.05}), options);
  models::DataLoader loader({data.inputs, data.labels}, {.batch_size = 8, .shuffle = true, .seed = 1});
  const optim::History history = trainer.fit(loader, {.epochs = 8});
  const auto loss = history.series("loss");
  CHECK(loss.back() < 0.6 * loss.front());
  CHECK(history.epochs.back().at("accuracy") > 0.8);
  CHECK(strategy->staleness_seen() <= 1);
}

namespace {

constexpr int kGoTag = 4201;

// One asynchronous run of `steps` steps per rank in which worker 0 holds
// back: it starts only once worker 1 has had `bound` pushes answered, so
// worker 1 was then `bound` pushes ahead of it, as far as the bound allows
// and no farther; and it waits a moment longer, in which a worker the
// servers let run farther would do so. Returns this rank's strategy.
std::shared_ptr<ParameterServer> run_holding_back_worker_0(const Communicator& world, int servers, int bound,
                                                           int steps) {
  auto strategy = std::make_shared<ParameterServer>(
      world, ParameterServerOptions{.servers = servers, .asynchronous = true, .max_staleness = bound});
  const auto model = test::make_classifier(3, /*dropout=*/false);
  optim::SGD sgd(model->parameters(), {.lr = 0.05});
  strategy->prepare(*model, &sgd);
  const bool two_workers = strategy->worker_count() >= 2;
  std::array<std::byte, 1> go{};
  bool released = false;
  if (world.rank() == 0 && two_workers) {
    // A deadline rather than a hang where the servers hold worker 1 back
    // wrongly: it then fails the check of the staleness reached.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!world.probe_any(kGoTag) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (world.probe_any(kGoTag)) {
      world.recv(go, 1, kGoTag);
      released = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto data = test::make_blobs(8, 10 + static_cast<std::uint64_t>(world.rank()));
  for (int step = 0; step < steps; ++step) {
    if (world.rank() == 1 && two_workers && step == bound) world.send(go, 0, kGoTag);
    if (!strategy->is_server()) {
      sgd.zero_grad();
      layers::cross_entropy((*model)(data.inputs), data.labels).backward();
    }
    strategy->update(*model, sgd);
  }
  if (world.rank() == 0 && two_workers && !released) world.recv(go, 1, kGoTag);
  return strategy;
}

}  // namespace

TEST_CASE(
    "ParameterServer: asynchronous, a worker runs at most max_staleness pushes ahead of the slowest, and "
    "that far when the slowest holds back") {
  const Communicator world = Communicator::world();
  // Two workers or more wherever there are 3 ranks or more.
  const int most_servers = std::max(1, world.size() - 2);
  for (int servers = 1; servers <= most_servers; ++servers) {
    for (const int bound : {0, 1, 3}) {
      CAPTURE(servers);
      CAPTURE(bound);
      const auto strategy = run_holding_back_worker_0(world, servers, bound, bound + 2);
      // With one worker, it is the slowest: never ahead.
      const std::int64_t reached = strategy->worker_count() >= 2 ? bound : 0;
      if (strategy->is_server()) {
        CHECK(strategy->staleness_seen() <= bound);
        CHECK(strategy->staleness_seen() == reached);
      } else {
        CHECK(strategy->staleness_seen() == 0);
      }
    }
  }
}

TEST_CASE("ParameterServer: as many servers as ranks is an error naming the counts") {
  const Communicator world = Communicator::world();
  CHECK(test::throws_error_mentioning([&] { ParameterServer(world, ParameterServerOptions{.servers = world.size()}); },
                                      {std::to_string(world.size()) + " server(s)", "no worker"}));
}
