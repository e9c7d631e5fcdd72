// The parallel module's front door: a typed description of how a run is
// spread (ParallelConfig) and the ranks it spans go in; out comes what the
// Trainer needs (ParallelSetup): the strategy, the model this rank holds (a
// pipeline rank: its stage alone) on the device its batches go to, and the
// words the run prints about it. ddl-train, the examples and an embedder's
// program assemble their runs with the same call (PyTorch's init_device_mesh
// and parallelize_module in one), so a new parallel mode is added here and in
// its strategy, not in every program that trains.
//
//   const auto ranks = parallel::job_ranks();             // mpiexec's, if any
//   const parallel::ParallelConfig config{.kind = parallel::StrategyKind::data};
//   const auto setup = parallel::make_setup(config, ranks, models::model_layers("mnist_cnn"),
//                                           {.sample_shape = Shape({1, 28, 28}), .batch = 128});
//   auto optimizer = std::make_shared<optim::SGD>(setup.model->parameters(), optim::SgdOptions{.lr = 0.01});
//   optim::Trainer trainer(setup.model, layers::cross_entropy, optimizer, {.strategy = setup.strategy});
//   ... trainer.fit(loader_of(setup.device, 128 / setup.data_ranks, setup.strategy->shard()));
//   const std::string report = setup.strategy->report(*setup.model, *optimizer);  // every rank
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/core/error.hpp>
#include <ddl/core/random.hpp>
#include <ddl/core/shape.hpp>
#include <ddl/layers/layer_list.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/parameter_server.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline.hpp>
#include <ddl/parallel/strategies/pipeline/stage_split.hpp>

namespace ddl::parallel {

// How a run is spread:
//   none              one process (its layers may still be placed on
//                     several devices: ParallelConfig::placement);
//   data              data parallelism over every rank (DataParallel);
//   parameter_server  the last ranks serve parameters to the others
//                     (ParameterServer);
//   pipeline          one pipeline stage per rank (Pipeline);
//   hybrid            pipelines of stages, each stage's gradients averaged
//                     over the pipelines, each stage's layers optionally
//                     split over tensor groups (a 3-D ProcessGrid of
//                     Pipelines);
//   tensor            layers split inside over tensor groups of
//                     `tensor_ranks` ranks, the groups replicas of each
//                     other averaging their gradients (TensorParallel).
enum class StrategyKind { none, data, parameter_server, pipeline, hybrid, tensor };

// "none", "data", "ps", "pipeline", "hybrid", "tensor"; parse_strategy_kind throws
// ddl::Error listing them for any other name.
std::string_view strategy_kind_name(StrategyKind kind);
StrategyKind parse_strategy_kind(std::string_view name);
std::vector<StrategyKind> all_strategy_kinds();

// Whether the strategy cuts the model into pipeline stages.
bool is_pipelined(StrategyKind kind);

// A configuration that does not fit the job (a rank count, a split, a
// placement, a device): the caller's mistake, not a failure while running.
// Thrown alike on every rank where the ranks must agree on it. `setting`
// names what is at fault ("placement", "split", "servers", "stages", or
// "device" and its text), so a program can name its own option for it;
// empty when the configuration as a whole does not fit the job.
struct ConfigError : Error {
  ConfigError(std::string at_fault, std::string why)
      : Error(at_fault.empty() ? why : at_fault + ": " + why), setting(std::move(at_fault)), reason(std::move(why)) {}
  explicit ConfigError(std::string why) : ConfigError("", std::move(why)) {}
  std::string setting;
  std::string reason;
};

// How the model is cut into pipeline stages (pipeline and hybrid).
struct StageLayout {
  // Stages per pipeline; 0 under `pipeline` is one per rank. Required
  // under `hybrid`.
  int stages = 0;
  // Hybrid: the pipelines, each training on its share of every batch.
  int pipelines = 1;
  // Split points as parse_split takes them ("4,7"), or empty to balance
  // the stages by `balance`.
  std::string split{};
  StageBalance balance = StageBalance::Time;
};

struct ParallelConfig {
  StrategyKind kind = StrategyKind::none;
  // data parallelism's options (a hybrid's are in `pipeline`).
  DataParallelOptions data{};
  ParameterServerOptions parameter_server{};
  // pipeline and hybrid (`allreduce`, `bucket_bytes` and `overlap` average a
  // hybrid's gradients over the pipelines).
  PipelineOptions pipeline{};
  StageLayout layout{};
  // tensor: the ranks of each tensor group (0: every rank, one group); the
  // job's ranks must be a multiple. Its allreduce, and the replicas',
  // is data.algorithm. hybrid: each stage's layers split over tensor
  // groups of this many ranks (0 or 1: none), a 3-D grid of
  // pipelines x stages x tensor_ranks ranks (process_grid.hpp); the
  // groups sum with pipeline.allreduce.
  int tensor_ranks = 0;
  // none: "0-6=cpu:0,7-10=cpu:1" places each layer on a device of its own
  // (placement.hpp); empty: the whole model on the run's device.
  std::string placement{};
};

// The ranks that share each batch, each reading its own part of it: every
// rank under data parallelism, the workers of a parameter server, the
// pipelines of a hybrid grid, the replicas of a tensor group, one for a
// pipeline (its stages all read every batch) and for one process. `world_size` is the job's rank count (1
// alone). Throws ConfigError when the configuration does not fit that many
// ranks, naming both, or is not whole (hybrid without a stage count).
int data_ranks(const ParallelConfig& config, int world_size);

// The ranks a run spans: every rank of the job when it was started as
// several (mpiexec, srun), else none. Always none in a build without MPI.
std::optional<Communicator> job_ranks();

// What the run trains, beyond how it is spread.
struct RunRequest {
  Shape sample_shape{};    // one input sample, e.g. {1, 28, 28}
  std::int64_t batch = 1;  // the global batch (a pipeline times its layers at its micro-batch)
  // "cpu", "cpu:1", "cuda:0", or a type alone: "cuda" is this rank's GPU
  // on its node (its node-local rank's, or the only one it sees).
  std::string device = "cpu";
  Generator* weights = nullptr;      // initialises the model (null: default_generator())
  std::ostream* progress = nullptr;  // where rank 0 says what takes a while (timing layers)
};

struct ParallelSetup {
  std::shared_ptr<optim::Strategy> strategy;  // never null: one process gets a plain Strategy
  std::shared_ptr<layers::Sequential> model;  // on its device(s); a pipeline rank's stage alone
  Device device;                              // where batches, losses and targets go
  int data_ranks = 1;                         // as data_ranks() above
  // For the run's header: the device, or the placement and the data's
  // device; a pipeline's stages and how they were chosen, or a
  // tensor-parallel rank's layers (empty otherwise: print the model's
  // summary, which runs a forward pass).
  std::string where;
  std::string stages;
  // "2 ranks", "2 pipelines": over what the run's throughput is summed
  // (empty in one process).
  std::string scope;
  // What `allreduce auto` chose and why ("allreduce auto: hierarchical (4
  // ranks, 2 per node ...; predicted ...)"); empty when an algorithm was named.
  std::string allreduce_choice;
};

// Collective over `ranks` where the strategy has several. Builds the
// strategy the configuration names over `ranks` (none: one process; a
// strategy other than none needs ranks), resolves the device (collectively
// where it is each rank's GPU), measures the layers when a pipeline is
// balanced by time (rank 0 for all), and builds this rank's model from
// `layers` with the request's generator (so every rank's weights are those
// of the whole model built in one process). Throws ConfigError, alike on
// every rank, for a configuration that does not fit; ddl::Error for a
// failure while building.
ParallelSetup make_setup(const ParallelConfig& config, const std::optional<Communicator>& ranks,
                         const layers::LayerList& layers, const RunRequest& request);

}  // namespace ddl::parallel
