// Activation recomputation (layers/recompute.hpp, Sequential::recompute):
// training with recomputed segments is bit for bit training without them,
// dropout's masks and BatchNorm's running statistics included, while the
// segments' activations are not held between forward and backward.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/recompute.hpp>

#include <vector>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

namespace {

std::shared_ptr<layers::Sequential> model_of(std::uint64_t seed) {
  Generator generator(seed);
  return test::stateful_cnn_layers().build(&generator);
}

struct Trained {
  std::vector<float> losses;
  std::vector<std::vector<float>> state;        // every parameter and buffer, in state_dict order
  std::vector<std::size_t> held_after_forward;  // bytes the forward left in use, per step
};

// Four SGD steps on random batches of 7 images (the same for every call).
Trained train(layers::Sequential& model) {
  Generator data(77);
  manual_seed(5);  // dropout's masks
  optim::SGD sgd(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  Trained trained;
  for (int step = 0; step < 4; ++step) {
    const Tensor images = uniform({7, 1, 12, 12}, -1.0f, 1.0f, {}, &data);
    std::vector<std::int64_t> labels;
    for (std::int64_t i = 0; i < 7; ++i) labels.push_back((i * 3 + step) % 10);
    const Tensor targets = from_vector(labels, {7});
    sgd.zero_grad();
    const std::size_t before = memory_stats(cpu()).bytes_in_use;
    const Tensor loss = layers::cross_entropy(model.forward(images), targets);
    trained.held_after_forward.push_back(memory_stats(cpu()).bytes_in_use - before);
    loss.backward();
    sgd.step();
    trained.losses.push_back(loss.item());
  }
  for (const auto& entry : model.state_dict()) trained.state.push_back(entry.second.to_vector<float>());
  return trained;
}

}  // namespace

TEST_CASE("recompute: segments trained with recomputation equal training without, bit for bit") {
  const auto plain = model_of(11);
  const Trained expected = train(*plain);
  // Awkward segments: one layer, a run through BatchNorm, one through
  // dropout to the last layer; and the whole model as one.
  for (const auto& ranges : {std::vector<layers::Sequential::LayerRange>{{0, 0}, {1, 3}, {5, 8}},
                             std::vector<layers::Sequential::LayerRange>{{0, 8}}}) {
    CAPTURE(ranges.size());
    const auto model = model_of(11);
    model->recompute(ranges);
    CHECK(model->recomputed() == ranges);
    const Trained actual = train(*model);
    CHECK(actual.losses == expected.losses);
    REQUIRE(actual.state.size() == expected.state.size());
    for (std::size_t i = 0; i < actual.state.size(); ++i) {
      CAPTURE(model->state_dict()[i].first);
      CHECK(actual.state[i] == expected.state[i]);  // BatchNorm's running statistics among them
    }
    // The segments' activations are not held after the forward.
    for (std::size_t step = 0; step < actual.held_after_forward.size(); ++step) {
      CAPTURE(step);
      CHECK(actual.held_after_forward[step] < expected.held_after_forward[step]);
    }
  }
}

TEST_CASE("recompute: in evaluation and without the tape the layers compute what they compute without it") {
  const auto model = model_of(12);
  model->recompute({{0, 8}});
  model->eval();
  Generator data(3);
  const Tensor images = uniform({3, 1, 12, 12}, -1.0f, 1.0f, {}, &data);
  const Tensor y = model->forward(images);
  Tensor untaped;
  {
    const NoGradGuard no_tape;
    untaped = model->forward(images);
  }
  CHECK_FALSE(untaped.requires_grad());  // nothing recorded
  const auto plain = model_of(12);
  plain->eval();
  const std::vector<float> expected = plain->forward(images).to_vector<float>();
  CHECK(y.to_vector<float>() == expected);
  CHECK(untaped.to_vector<float>() == expected);
}

TEST_CASE("recompute: ranges outside the model, overlapping or out of order are refused naming the range") {
  const auto model = model_of(13);
  CHECK(throws_error_mentioning([&] { model->recompute({{3, 9}}); }, {"3-9", "0-8"}));
  CHECK(throws_error_mentioning([&] { model->recompute({{4, 2}}); }, {"4-2"}));
  CHECK(throws_error_mentioning([&] { model->recompute({{2, 4}, {4, 6}}); }, {"4-6", "2-4"}));
  CHECK(throws_error_mentioning([&] { model->recompute({{5, 6}, {0, 1}}); }, {"0-1", "5-6"}));
  CHECK(model->recomputed().empty());  // nothing changed
  Generator own(1);
  layers::Sequential with_own;
  with_own.emplace<layers::ReLU>().emplace<layers::Dropout>(0.5f, &own);
  CHECK(throws_error_mentioning([&] { with_own.recompute({{0, 1}}); }, {"layer 1 (Dropout)", "generator of its own"}));
  with_own.recompute({{0, 0}});  // the ReLU alone replays nothing
  CHECK(with_own.recomputed().size() == 1);
  CHECK(model->range_of(" 2-4 ", "ctx") == layers::Sequential::LayerRange{2, 4});
  CHECK(model->range_of("7", "ctx") == layers::Sequential::LayerRange{7, 7});
  CHECK(throws_error_mentioning([&] { (void)model->range_of("2-x", "--recompute 2-x"); },
                                {"--recompute 2-x", "no layer is named 'x'", "5 (Dropout)"}));
  CHECK(throws_error_mentioning([&] { (void)model->range_of("12", "ctx"); }, {"ctx", "layer 12", "0-8"}));
}
