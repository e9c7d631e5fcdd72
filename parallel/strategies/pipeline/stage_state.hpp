// Internal: a pipeline stage's part of a checkpoint (pipeline.hpp). A stage's
// model names its layers by their index in the whole model, so its model
// entries already carry the single-process names; its optimizer numbers
// parameters from 0, so its entries "<k>.<buffer>" are renamed by the
// parameter's index in the whole model (which the ranks learn from each
// layer's parameter count). A rank may hold several runs of layers (the
// chunks of an interleaved schedule).
#pragma once

#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

// Collective over the pipeline's ranks, whose models hold the
// `layer_count` layers of the whole model between them: rank 0's `state` becomes the
// whole model's, parameters of every layer then buffers of every layer, in
// layer order (the order one process saves them in); the other ranks' is
// unchanged.
void gather_stage_state(const Communicator& comm, const layers::Module& model, std::size_t layer_count,
                        optim::TrainingState& state);

// Collective: `state`, the whole model's, becomes this rank's (the layers
// of `model`).
void select_stage_state(const Communicator& comm, const layers::Module& model, std::size_t layer_count,
                        optim::TrainingState& state);

}  // namespace ddl::parallel
