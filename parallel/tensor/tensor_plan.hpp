// Which layers of a Sequential a tensor group splits, and this rank's model
// built from the plan. The planner walks the layers with what the
// activation between them is: replicated (every rank holds it whole) or
// sharded (each rank holds its features of it):
//
//   layer        on a replicated activation      on a sharded one
//   Dense        column, when a row partner       row: the activation is
//                follows (below); else whole      replicated after it
//   ReLU, Tanh,  whole                            sharded: acts on each
//   Sigmoid                                       rank's features alone
//   Dropout      whole: the same mask everywhere  sharded: each rank its
//                                                 part of one mask
//   anything     whole                            (never: a column layer
//   else                                          is split only when its
//                                                 partner follows)
//
// A Dense layer on a replicated activation becomes column-parallel when
// the next layer that is not elementwise (an activation or a dropout) is a
// Dense layer, its row partner, and each has at least as many features
// along its split as the group has ranks; otherwise it stays whole on
// every rank. So mnist_cnn's Dense pair (7, 10) and wide_mlp's four pairs
// are split, and a model ends on a replicated activation, as its loss
// needs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ddl/core/random.hpp>
#include <ddl/layers/layer_list.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

enum class TensorRole {
  whole,    // every rank holds the layer whole
  column,   // split by output features
  row,      // split by input features
  sharded,  // no weights; acts on each rank's features (an activation, a dropout)
};

struct TensorPlan {
  int ranks = 1;
  std::vector<TensorRole> roles;  // per layer
  // The pairs, e.g. "column 7 + row 10; column 1 + row 3".
  std::string describe() const;
  bool splits_anything() const;
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

}  // namespace ddl::parallel
