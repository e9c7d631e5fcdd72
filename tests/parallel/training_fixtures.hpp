// What the multi-rank training tests share: a small CNN without dropout (a
// Sequential, and a LayerList for pipelines),
// random images whose count divides by 2, 3 and 4 ranks and by the batch,
// a two-epoch training run under a given strategy (on the CPU or a GPU),
// and the comparison of the weights it ends with.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/parallel/communication/agreement.hpp>

#include "support/temp_dir.hpp"
#include "support/test_data.hpp"

namespace ddl::test {

inline constexpr std::int64_t kSamples = 48;  // divisible by 2, 3 and 4 ranks, and by the batch
inline constexpr std::int64_t kGlobalBatch = 12;

// A small CNN without dropout: Conv 1-4 3x3, ReLU, MaxPool 2, Flatten, Dense 100-10.
inline std::shared_ptr<layers::Sequential> small_cnn(std::uint64_t seed) {
  Generator generator(seed);
  auto model = std::make_shared<layers::Sequential>();
  model->emplace<layers::Conv2d>(1, 4, layers::Conv2dOptions{}, &generator)
      .emplace<layers::ReLU>()
      .emplace<layers::MaxPool2d>()
      .emplace<layers::Flatten>()
      .emplace<layers::Dense>(100, 10, true, &generator);
  return model;
}

// small_cnn as a LayerList: Conv 1-4 3x3, ReLU, MaxPool 2, Flatten, Dense 100-16,
// Tanh, Dense 16-10. Seven layers, enough for four stages; no dropout.
inline layers::LayerList small_cnn_layers() {
  layers::LayerList list;
  list.emplace_init<layers::Conv2d>(1, 4, layers::Conv2dOptions{})
      .emplace<layers::ReLU>()
      .emplace<layers::MaxPool2d>()
      .emplace<layers::Flatten>()
      .emplace_init<layers::Dense>(100, 16, true)
      .emplace<layers::Tanh>()
      .emplace_init<layers::Dense>(16, 10, true);
  return list;
}

inline models::Dataset random_images() {
  Generator generator(42);
  const Tensor inputs = uniform({kSamples, 1, 12, 12}, 0.0f, 1.0f, {}, &generator);
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < kSamples; ++i) labels.push_back((i * 7) % 10);
  return {inputs, from_vector(labels, {kSamples})};
}

// Rank r's data for a given size: uniform in [-1, 1) from its own seed.
inline std::vector<float> rank_data(int rank, std::int64_t n) {
  Generator generator(1000 + static_cast<std::uint64_t>(rank) * 7919 + static_cast<std::uint64_t>(n));
  return n == 0 ? std::vector<float>{} : uniform({n}, -1.0f, 1.0f, {}, &generator).to_vector<float>();
}

using MakeOptimizer = std::function<std::shared_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Trains 2 epochs and returns the flattened parameters (whole: a sharded
// strategy gathers them).
inline std::vector<float> train(std::shared_ptr<optim::Strategy> strategy, std::int64_t batch,
                                const MakeOptimizer& make, std::uint64_t init_seed, const Device& device = cpu(),
                                std::int64_t batches_per_step = 1) {
  auto model = small_cnn(init_seed);
  model->to(device);
  optim::TrainerOptions options = quiet_options({}, strategy);
  options.batches_per_step = batches_per_step;
  optim::Trainer trainer(model, layers::cross_entropy, make(model->parameters()), options);
  models::DataLoader loader(random_images(), {.batch_size = batch, .shuffle = true, .seed = 3, .device = device});
  trainer.fit(loader, {.epochs = 2});
  if (strategy) strategy->whole_parameters(*model);
  return flat_parameters(*model);
}

inline MakeOptimizer sgd_with_momentum() {
  return [](std::vector<Tensor> p) {
    return std::make_shared<optim::SGD>(std::move(p), optim::SgdOptions{.lr = 0.05, .momentum = 0.9});
  };
}

// The optimizers whose state differs in kind: SGD's momentum, Adadelta's
// two accumulators, Adam's two moments with weight decay.
inline const std::vector<std::pair<const char*, MakeOptimizer>>& every_optimizer() {
  static const std::vector<std::pair<const char*, MakeOptimizer>> all{
      {"SGD with momentum", sgd_with_momentum()},
      {"Adadelta", [](std::vector<Tensor> p) { return std::make_shared<optim::Adadelta>(std::move(p)); }},
      {"Adam",
       [](std::vector<Tensor> p) {
         return std::make_shared<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 0.01, .weight_decay = 1e-3});
       }},
  };
  return all;
}

// Whether every rank sees a CUDA device: a case that needs one skips alike
// on every rank, so none waits in a collective the others never join.
inline bool every_rank_has_a_gpu(const parallel::Communicator& comm) {
  std::array<double, 1> without{cuda_available() ? 0.0 : 1.0};
  comm.sum_doubles(without);
  return without[0] == 0.0;
}

// Whether no two ranks drive one physical GPU (their UUIDs differ, whatever
// index each process gives its GPU): what DataParallel decides by whether
// it may reduce over NCCL. A collective.
inline bool gpus_of_their_own(const parallel::Communicator& comm, const Device& gpu) {
  const std::vector<std::string> uuids = parallel::gather_gpu_uuids(comm, gpu.index());
  return std::set<std::string>(uuids.begin(), uuids.end()).size() == uuids.size();
}

// A path in rank 0's temporary directory, known to every rank.
inline std::string shared_path(const parallel::Communicator& comm, std::optional<TempDir>& directory, const std::string& file) {
  std::array<char, 512> path{};
  if (comm.rank() == 0) {
    directory.emplace("pipeline_checkpoint");
    const std::string full = (directory->path / file).string();
    REQUIRE(full.size() < path.size());
    std::memcpy(path.data(), full.c_str(), full.size());
  }
  comm.broadcast_bytes(std::as_writable_bytes(std::span<char>(path)), 0);
  return path.data();
}

// Ends a fit() as a kill would, after the checkpoints of the steps before:
// throws StopAt::Stopped when step `at` is about to begin (on every rank
// alike, before the step's first message).
struct StopAt : optim::Callback {
  std::int64_t at;
  explicit StopAt(std::int64_t step) : at(step) {}
  void on_batch_begin(optim::Trainer& /*trainer*/, std::int64_t step) override {
    if (step == at) throw Stopped{};
  }
  struct Stopped {};
};

inline double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1e-3, std::abs(double{b[i]})));
  }
  return worst;
}

}  // namespace ddl::test
