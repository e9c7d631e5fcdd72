// Internal: a pipeline stage's part of a checkpoint (pipeline.hpp). A stage's
// model names its layers by their index in the whole model, so its model
// entries already carry the single-process names; its optimizer numbers
// parameters from 0, so its entries "<k>.<buffer>" are renamed by the
// parameters of the stages before it.
#pragma once

#include <ddl/layers/module.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/strategies/pipeline/stage_split.hpp>

namespace ddl::parallel {

// Collective over the pipeline's ranks: rank 0's `state` becomes the whole
// model's, parameters of every stage then buffers of every stage (the order
// one process saves them in); the other ranks' is unchanged.
void gather_stage_state(const Communicator& comm, const layers::Module& model, optim::TrainingState& state);

// Collective: `state`, the whole model's, becomes this stage's (`layers`).
void select_stage_state(const Communicator& comm, const StageRange& layers, const layers::Module& model,
                        optim::TrainingState& state);

}  // namespace ddl::parallel
