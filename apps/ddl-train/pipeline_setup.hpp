// ddl-train --parallel pipeline or hybrid: the stages from --split or
// --balance, the Pipeline strategy over the MPI ranks (hybrid: --dp
// pipelines of --pp stages), and this rank's stage of the model. Built with
// MPI only.
#pragma once

#include <memory>

#include <ddl/core/device.hpp>
#include <ddl/core/random.hpp>
#include <ddl/core/shape.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/parallel/pipeline.hpp>

#include "options.hpp"

namespace ddl::apps {

// The pipelines and their stages the options ask for; a UsageError unless
// they fit the job's ranks.
struct PipelineShape {
  int data_parallel = 1;
  int stages = 1;
};
PipelineShape pipeline_shape(const TrainOptions& options);

struct PipelineSetup {
  std::shared_ptr<parallel::Pipeline> pipeline;
  std::shared_ptr<layers::Sequential> stage_model;  // this rank's layers alone
  std::string description;                          // the stages, for the header
};

// Collective over the world's ranks. `sample_shape` is one input sample's
// shape (for --balance time); `weights` initialises the stage's layers as
// they are in the whole model. Bad stage counts and splits are UsageErrors,
// alike on every rank.
PipelineSetup make_pipeline(const TrainOptions& options, const Shape& sample_shape, const Device& device,
                            Generator& weights);

// The GPU a pipeline rank takes for --device cuda: its node-local rank's.
Device pipeline_gpu();

}  // namespace ddl::apps
