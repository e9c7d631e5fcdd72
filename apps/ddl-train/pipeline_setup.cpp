// ddl-train's pipeline (see pipeline_setup.hpp).
#include "pipeline_setup.hpp"

#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include <ddl/core/error.hpp>
#include <ddl/models/zoo.hpp>
#include <ddl/parallel/agreement.hpp>
#include <ddl/parallel/stage_split.hpp>

namespace ddl::apps {

Device pipeline_gpu() {
  return parallel::local_gpu(parallel::Communicator::world(), "ddl-train", "--parallel pipeline");
}

PipelineShape pipeline_shape(const TrainOptions& o) {
  const parallel::Communicator world = parallel::Communicator::world();
  const bool hybrid = o.parallel == "hybrid";
  const int data_parallel = hybrid ? o.dp : 1;
  const int stages = hybrid ? o.pp : o.stages > 0 ? o.stages : world.size();
  if (data_parallel * stages != world.size()) {
    throw UsageError(hybrid ? fmt::format("--dp {} x --pp {} needs {} ranks; this job has {} (mpiexec -n {})",
                                          data_parallel, stages, data_parallel * stages, world.size(),
                                          data_parallel * stages)
                            : fmt::format("--stages {} needs {} ranks, one per stage; this job has {} (mpiexec -n {})",
                                          stages, stages, world.size(), stages));
  }
  return {data_parallel, stages};
}

PipelineSetup make_pipeline(const TrainOptions& o, const Shape& sample_shape, const Device& device,
                            Generator& weights) {
  const parallel::Communicator world = parallel::Communicator::world();
  const bool hybrid = o.parallel == "hybrid";
  const auto [data_parallel, stages] = pipeline_shape(o);
  const layers::LayerList layers = models::model_layers(o.model);
  const int micro_batches = o.micro_batches > 0 ? o.micro_batches : 2 * stages;
  std::vector<parallel::StageRange> split;
  std::string how;
  try {
    if (!o.split.empty()) {
      split = parallel::parse_split(o.split, layers.size(), stages);
      how = "--split " + o.split;
    } else {
      const parallel::StageBalance balance = parallel::parse_stage_balance(o.balance);
      std::vector<double> costs(layers.size(), 0.0);
      // Timings differ from rank to rank: rank 0's decide for all, and a
      // failure there must not leave the others waiting for them.
      const std::int64_t micro_batch = (o.batch_size / data_parallel + micro_batches - 1) / micro_batches;
      std::string problem;
      if (balance != parallel::StageBalance::Time || world.rank() == 0) {
        if (balance == parallel::StageBalance::Time && !o.quiet) {
          std::cout << fmt::format("Timing each of the {} layers' forward and backward at micro-batch {} on {} "
                                   "(--balance time)...\n",
                                   layers.size(), micro_batch, device.str())
                    << std::flush;
        }
        try {
          costs = parallel::layer_costs(layers, balance, sample_shape, micro_batch, device);
        } catch (const Error& error) {
          problem = error.what();
        }
      }
      parallel::agree_all_can_proceed(world, problem, "measuring each layer's time");
      world.broadcast_bytes(std::as_writable_bytes(std::span(costs)), 0);
      split = parallel::balanced_split(costs, stages);
      how = fmt::format("balanced by {}\n{}", o.balance, parallel::format_stages(split, costs, balance));
    }
  } catch (const Error& error) {
    throw UsageError(fmt::format("--parallel pipeline: {}", error.what()));
  }
  PipelineSetup setup;
  const parallel::PipelineOptions options{.micro_batches = micro_batches,
                                         .schedule = parallel::parse_pipeline_schedule(o.schedule),
                                         .allreduce = parallel::parse_allreduce(o.allreduce),
                                         .defer_weight_gradients = o.weight_gradients == "batch"};
  setup.pipeline =
      std::make_shared<parallel::Pipeline>(parallel::ProcessGrid::split(world, data_parallel, stages), split, options);
  setup.stage_model = parallel::build_stage(layers, *setup.pipeline, &weights);
  setup.description = fmt::format("{} of {} stages ({}, {} micro-batches per batch, weight gradients per {}), {}",
                                  hybrid ? fmt::format("{} pipelines", data_parallel) : std::string("pipeline"),
                                  stages, o.schedule, micro_batches, o.weight_gradients, how);
  return setup;
}

}  // namespace ddl::apps
