// Fixtures of the engine's tests, so they need no data set and no models/
// code: a minimal BatchSource (consecutive rows of two tensors, optionally in
// an order shuffled afresh and reproducibly every epoch), a small
// classification problem and a small classifier for it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/optim/engine/batch_source.hpp>
#include <ddl/optim/engine/trainer.hpp>

#include "support/test_data.hpp"

namespace ddl::test {

class TensorBatches : public ddl::optim::BatchSource {
 public:
  TensorBatches(Tensor inputs, Tensor targets, std::int64_t batch_size, bool shuffle = false)
      : inputs_(std::move(inputs)), targets_(std::move(targets)), batch_size_(batch_size), shuffle_(shuffle) {}

  void begin_epoch(std::int64_t epoch, ddl::optim::Shard /*shard*/) override {
    order_.resize(static_cast<std::size_t>(inputs_.size(0)));
    std::iota(order_.begin(), order_.end(), 0);
    if (shuffle_) std::shuffle(order_.begin(), order_.end(), std::mt19937_64(static_cast<std::uint64_t>(epoch) + 1));
    position_ = 0;
  }

  std::optional<ddl::optim::Batch> next() override {
    if (position_ >= static_cast<std::int64_t>(order_.size())) return std::nullopt;
    const std::int64_t end = std::min<std::int64_t>(position_ + batch_size_, static_cast<std::int64_t>(order_.size()));
    std::vector<Tensor> inputs;
    std::vector<Tensor> targets;
    for (std::int64_t i = position_; i < end; ++i) {
      const std::int64_t row = order_[static_cast<std::size_t>(i)];
      inputs.push_back(slice(inputs_, row, row + 1));
      targets.push_back(slice(targets_, row, row + 1));
    }
    position_ = end;
    return ddl::optim::Batch{concat(inputs), concat(targets)};
  }

  std::int64_t batches_per_epoch(ddl::optim::Shard /*shard*/) const override {
    return (inputs_.size(0) + batch_size_ - 1) / batch_size_;
  }
  std::int64_t samples_per_epoch(ddl::optim::Shard /*shard*/) const override { return inputs_.size(0); }

 private:
  Tensor inputs_, targets_;
  std::int64_t batch_size_;
  bool shuffle_;
  std::vector<std::int64_t> order_;
  std::int64_t position_ = 0;
};

// Three classes of 4-D points: Gaussian noise around one centre per class;
// sample i has label i % 3.
struct Blobs {
  Tensor inputs;  // float32 [n, 4]
  Tensor labels;  // int64 [n]
};

inline Blobs make_blobs(std::int64_t n, std::uint64_t seed) {
  Generator generator(seed);
  const Tensor noise = normal({n, 4}, 0.0f, 0.7f, {}, &generator);
  std::vector<float> centres;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t label = i % 3;
    labels.push_back(label);
    for (std::int64_t d = 0; d < 4; ++d) centres.push_back(d == label ? 2.0f : (d == 3 ? -1.0f : 0.0f));
  }
  return {noise + from_vector(centres, {n, 4}), from_vector(labels, {n})};
}

// Dense 4-16, ReLU, [Dropout 0.3,] Dense 16-3: dropout makes a run depend on
// the generator's state, which checkpoints must restore.
inline std::shared_ptr<ddl::layers::Sequential> make_classifier(std::uint64_t seed, bool dropout) {
  Generator generator(seed);
  auto model = std::make_shared<ddl::layers::Sequential>();
  model->emplace<ddl::layers::Dense>(4, 16, true, &generator).emplace<ddl::layers::ReLU>();
  if (dropout) model->emplace<ddl::layers::Dropout>(0.3f);
  model->emplace<ddl::layers::Dense>(16, 3, true, &generator);
  return model;
}

// Cross-entropy, times `poison` (NaN or infinity) at the calls listed
// (0-based, counted per instance): the poison flows into the gradients as a
// real divergence's would.
inline optim::LossFunction poisoned_loss(std::set<int> calls, float poison) {
  auto count = std::make_shared<int>(0);
  return [calls = std::move(calls), poison, count](const Tensor& output, const Tensor& target) {
    const Tensor loss = layers::cross_entropy(output, target);
    return calls.count((*count)++) != 0 ? loss * poison : loss;
  };
}

// The weights after every step that fit() completed.
struct WeightsAfterEachStep : ddl::optim::Callback {
  std::vector<std::vector<float>> weights;
  void on_batch_end(ddl::optim::Trainer& trainer, std::int64_t /*step*/, const ddl::optim::Logs& /*logs*/) override {
    weights.push_back(flat_parameters(trainer.model()));
  }
};

}  // namespace ddl::test
