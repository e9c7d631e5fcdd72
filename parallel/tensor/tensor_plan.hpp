// Which layers of a Sequential a tensor group splits, and this rank's model
// built from the plan. The planner walks the layers with what the
// activation between them is: replicated (every rank holds it whole) or
// sharded (each rank holds its features, or its channels, of it):
//
//   layer           on a replicated activation     on a sharded one
//   Dense, Conv2d   column, when a row partner     row: the activation is
//                   follows (below); else whole    replicated after it
//   ReLU, Tanh,     whole                          sharded: acts on each
//   Sigmoid                                        rank's part alone
//   Dropout         whole: the same mask on        sharded: each rank its
//                   every rank                     part of one mask
//   BatchNorm2d,    whole                          sharded (channels only):
//   MaxPool2d,                                     per channel, so on each
//   AvgPool2d                                      rank's channels
//   Residual        its body planned as a          (never)
//                   Sequential of its own; the
//                   shortcut whole
//   anything else   whole                          (never)
//
// A Dense (Conv2d) layer on a replicated activation becomes column-parallel
// when the next layer of its Sequential that does not act on each feature
// (channel) alone is a Dense (Conv2d) layer, its row partner, and both have
// at least as many features (channels) along their split as the group has
// ranks; otherwise it stays whole on every rank. So mnist_cnn's two
// convolutions and its Dense pair, wide_mlp's four Dense pairs and each of
// resnet_small's blocks (its body's two convolutions) are split, and every
// Sequential ends on a replicated activation, as a loss and a residual sum
// need.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/random.hpp>
#include <ddl/layers/layer_list.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

enum class TensorRole {
  column,   // split by output features or channels
  row,      // split by input features or channels
  sharded,  // no weights split, or split alike (BatchNorm2d): acts on each rank's part
};

struct TensorPlan {
  int ranks = 1;
  std::size_t layers = 0;  // the model's, at the top
  // The layers not held whole, by their path in the model ("7",
  // "4.body.0"), in the model's order.
  std::vector<std::pair<std::string, TensorRole>> roles;
  // The pairs, e.g. "column 0 + row 2; column 7 + row 10".
  std::string describe() const;
  // The role of the layer at `path`, if it is not held whole.
  std::optional<TensorRole> role_of(const std::string& path) const;
  // The pair whose sharded activation flows into top-level layer `layer`
  // ("column 7 + row 10" for layers 8 to 10), or empty where that
  // activation is replicated: where a pipeline stage may begin.
  std::string pair_across(std::size_t layer) const;
};

// Plans `layers` for a tensor group of `ranks` ranks. Builds each layer
// alone once, with a scratch generator, to see what it is. Throws
// ddl::Error when nothing can be split, naming the model's layers.
TensorPlan plan_tensor_parallel(const layers::LayerList& layers, int ranks);

// This rank's model: every layer built in order from `generator` (so its
// weights are the whole model's), the split ones cut down to this rank's
// slice as soon as they are built, each named by its index as in the whole
// model. Collective over nothing; the plan must be the group's size.
std::shared_ptr<layers::Sequential> build_tensor_parallel(const layers::LayerList& layers, const TensorPlan& plan,
                                                          std::shared_ptr<const TensorGroup> group,
                                                          Generator* generator);
// Its layers first..last alone (a pipeline stage's), the ones before built
// and dropped only for their draws from `generator`, as LayerList::build
// does. ddl::Error when the range cuts a pair (pair_across).
std::shared_ptr<layers::Sequential> build_tensor_parallel(const layers::LayerList& layers, const TensorPlan& plan,
                                                          std::shared_ptr<const TensorGroup> group,
                                                          Generator* generator, std::size_t first, std::size_t last);

}  // namespace ddl::parallel
