// A tensor-parallel rank's part of a checkpoint. Its model names every
// parameter and buffer as the whole model does ("7.weight"), with its
// slice's shape where the layer is split (split_layer.hpp), and its
// optimizer numbers the parameters in the whole model's order, its state
// of a split parameter ("5.m") shaped as the slice. So joining the
// group's slices along each split dim gives the single-process
// checkpoint, and cutting one gives each rank's part.
#pragma once

#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>

namespace ddl::parallel {

// Collective over the group: on its rank 0 every split entry of `state`
// becomes the whole one, joined from every rank's slice in rank order;
// the other ranks' state is unchanged.
void gather_tensor_state(const TensorGroup& group, const layers::Module& model, optim::TrainingState& state);

// `state` holds the whole model's entries; each split one becomes this
// rank's slice of it. ddl::Error naming an entry whose size along its split
// dim is not the whole layer's.
void select_tensor_state(const TensorGroup& group, const layers::Module& model, optim::TrainingState& state);

}  // namespace ddl::parallel
