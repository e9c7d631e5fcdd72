// The parallel module's front door (see setup.hpp): one function per way of
// spreading a run, and make_setup choosing among them.
#include <ddl/parallel/setup.hpp>

#include <algorithm>
#include <numeric>
#include <ostream>

#include <fmt/format.h>

#include <ddl/parallel/choice_by_name.hpp>
#include <ddl/parallel/collectives/allreduce_choice.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/communication/link_measure.hpp>
#include <ddl/parallel/config.hpp>
#include <ddl/parallel/planning/cost_model.hpp>
#include <ddl/parallel/planning/placement.hpp>
#include <ddl/parallel/strategies/layer_placement.hpp>
#include <ddl/parallel/strategies/tensor_parallel.hpp>

namespace ddl::parallel {
namespace {

// Seconds of ping-pongs per message size when the set-up measures the link
// between ranks for --balance time: 8 sizes, a few milliseconds each.
constexpr double kLinkBudgetSeconds = 0.003;

// A library error raised by a configuration that does not fit, as the
// caller's mistake in `setting`.
template <class Build>
auto as_config_error(const std::string& setting, Build build) {
  try {
    return build();
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& error) {
    throw ConfigError(setting, error.what());
  }
}

// A strategy over several ranks in a build without MPI: the reason it
// cannot run, before any count of ranks is compared.
void require_mpi(StrategyKind kind) {
  if (!Communicator::built()) {
    throw ConfigError(fmt::format("the {} strategy needs MPI, and this ddl was built without it (DDL_MPI=OFF)",
                                  strategy_kind_name(kind)));
  }
}

// The ranks a strategy that always spans several runs over: the job's, or
// a refusal that says how to start them.
const Communicator& several_ranks(const std::optional<Communicator>& ranks, StrategyKind kind) {
  require_mpi(kind);
  if (!ranks) {
    throw ConfigError(
        fmt::format("the {} strategy needs several ranks: start it with mpiexec -n N", strategy_kind_name(kind)));
  }
  return *ranks;
}

// A pipeline's ranks: the job's, or this process alone as a pipeline of one
// stage (under mpiexec too, when the caller passes no ranks).
Communicator pipeline_ranks(const std::optional<Communicator>& ranks, StrategyKind kind) {
  require_mpi(kind);
  if (ranks) return *ranks;
  const Communicator world = Communicator::world();
  return world.size() == 1 ? world : world.split(world.rank(), 0);
}

// The device the request names: itself, or for a type alone the one the
// strategy gives this rank (`by_type`, collective for GPUs).
template <class ByType>
Device resolve_device(const std::string& text, ByType by_type) {
  const Device device = as_config_error("device " + text, [&] { return Device::parse(text); });
  if (text.find(':') != std::string::npos) return device;
  return as_config_error("device " + text, [&] { return by_type(device.type()); });
}

// The whole model on the device the strategy gives this rank: one
// process, data parallelism and the parameter server (every rank or
// worker holds all of it).
ParallelSetup whole_model(std::shared_ptr<optim::Strategy> strategy, const layers::LayerList& layers,
                          const RunRequest& request) {
  ParallelSetup setup;
  setup.strategy = std::move(strategy);
  setup.device = resolve_device(request.device, [&](DeviceType type) { return setup.strategy->device(type); });
  setup.model = layers.build(request.weights);
  setup.model->to(setup.device);
  setup.where = setup.device.str();
  return setup;
}

// One process: the whole model, or its layers placed on several devices.
ParallelSetup one_process(const ParallelConfig& config, const layers::LayerList& layers, const RunRequest& request) {
  if (config.placement.empty()) return whole_model(std::make_shared<optim::Strategy>(), layers, request);
  ParallelSetup setup;
  setup.strategy = std::make_shared<LayerPlacement>();
  setup.device = resolve_device(request.device, [&](DeviceType type) { return setup.strategy->device(type); });
  setup.model = layers.build(request.weights);
  as_config_error("placement",
                  [&] { place(*setup.model, parse_placement(config.placement, *setup.model), setup.device); });
  setup.where = fmt::format("placed {}, data on {}", config.placement, setup.device.str());
  return setup;
}

// The stages from the split points, or balanced by the layers' costs. Times
// differ from rank to rank: rank 0's decide for all, and a failure there
// must not leave the others waiting for them. By time, one stage per rank,
// the cut is the one whose step under the schedule simulates shortest
// (schedule_balanced_split), its messages priced by the link measured
// between ranks 0 and 1.
// With tensor groups (`plan`), stages begin only where the plan's
// activation is whole.
// Under a schedule of several chunks per rank, there are ranks x chunks
// stages, and the balance evens out each rank's total; by time, each model
// stage's forward, backward and weight-gradient times go to
// `schedule_costs`, which ZB-V builds its lists from.
std::vector<StageRange> choose_stages(const ParallelConfig& config, const Communicator& comm, int ranks, int chunks,
                                      const layers::LayerList& layers, const RunRequest& request, const Device& device,
                                      const TensorPlan* plan, std::string& how, PipelineCosts& schedule_costs) {
  const StageLayout& layout = config.layout;
  const int stages = ranks * chunks;
  if (!layout.split.empty()) {
    how = "split before layers " + layout.split;
    const auto split = as_config_error("split", [&] { return parse_split(layout.split, layers.size(), stages); });
    for (std::size_t s = 1; plan != nullptr && s < split.size(); ++s) {
      if (const std::string across = plan->pair_across(split[s].first); !across.empty()) {
        throw ConfigError("split", fmt::format("stage {} would begin at layer {}, inside the tensor-parallel pair {} "
                                               "(a sharded activation); cut before or after the pair",
                                               s, split[s].first, across));
      }
    }
    return split;
  }
  const int pipelines = config.kind == StrategyKind::hybrid ? layout.pipelines : 1;
  const int micro = micro_batches(config.pipeline, ranks);
  const std::int64_t micro_batch = (request.batch / pipelines + micro - 1) / micro;
  const bool timed = layout.balance == StageBalance::Time;
  std::vector<double> costs(layers.size(), 0.0);
  std::vector<LayerTime> times(layers.size());
  std::string problem;
  if (!timed || comm.rank() == 0) {
    if (timed && request.progress != nullptr) {
      *request.progress << fmt::format(
                               "Timing each of the {} layers' forward and backward at micro-batch {} on {} "
                               "(balancing the stages by time)...\n",
                               layers.size(), micro_batch, device.str())
                        << std::flush;
    }
    try {
      if (timed) {
        times = layer_times(layers, request.sample_shape, micro_batch, device);
        std::transform(times.begin(), times.end(), costs.begin(), [](const LayerTime& t) { return t.total(); });
      } else {
        costs = layer_costs(layers, layout.balance, request.sample_shape, micro_batch, device);
      }
    } catch (const Error& error) {
      problem = error.what();
    }
  }
  as_config_error("balance", [&] { agree_all_can_proceed(comm, problem, "measuring each layer's time"); });
  comm.broadcast_bytes(std::as_writable_bytes(std::span(costs)), 0);
  if (timed) comm.broadcast_bytes(std::as_writable_bytes(std::span(times)), 0);
  std::vector<bool> may_begin(layers.size(), true);
  for (std::size_t i = 0; plan != nullptr && i < layers.size(); ++i) may_begin[i] = plan->pair_across(i).empty();
  const ChunkLayout chunk_order = chunk_layout(config.pipeline.schedule);
  const auto balanced =
      as_config_error("stages", [&] { return balanced_chunk_split(costs, ranks, chunks, chunk_order, may_begin); });
  if (timed && chunks == 1 && comm.size() > 1) {
    // The schedule's own step, its messages priced by the link between
    // ranks 0 and 1 (stage neighbours on one node, as a pipeline is laid out).
    const cost::Link link = measure_link(comm, 1, kLinkBudgetSeconds).link;
    const WeightGradients weights = weight_gradients_of(config.pipeline);
    const PipelineSchedule schedule = config.pipeline.schedule;
    const auto split = as_config_error(
        "stages", [&] { return schedule_balanced_split(times, ranks, schedule, micro, weights, link, may_begin); });
    how = fmt::format(
        "balanced by time, for the {} schedule's step at M = {}: simulated {:.1f} ms ({:.1f} ms split by forward "
        "+ backward alone), each message {:.1f} us + {:.2f} GB/s (ranks 0 and 1, measured)\n{}",
        pipeline_schedule_name(schedule), micro,
        1e3 * simulated_step_seconds(times, split, schedule, micro, weights, link),
        1e3 * simulated_step_seconds(times, balanced, schedule, micro, weights, link), 1e6 * link.alpha,
        link.beta > 0.0 ? 1e-9 / link.beta : 0.0, format_timed_stages(split, times));
    return split;
  }
  const auto& split = balanced;
  how = fmt::format("balanced by {}\n{}", stage_balance_name(layout.balance),
                    format_stages(split, costs, layout.balance));
  if (timed) {
    for (const StageRange& stage : split) {
      const auto sum = [&](double LayerTime::*part) {
        double total = 0.0;
        for (std::size_t layer = stage.first; layer <= stage.last; ++layer) total += times[layer].*part;
        return total;
      };
      schedule_costs.forward_per_stage.push_back(sum(&LayerTime::forward));
      schedule_costs.backward_per_stage.push_back(sum(&LayerTime::backward));
      schedule_costs.weight_per_stage.push_back(sum(&LayerTime::weight));
    }
  }
  if (chunks > 1) {
    // What each rank holds of the total, its chunks' shares together.
    const double total = std::accumulate(costs.begin(), costs.end(), 0.0);
    const std::vector<double> totals = rank_totals(costs, split, ranks, chunk_order);
    how += "per rank:";
    for (int rank = 0; rank < ranks; ++rank) {
      const double share = total > 0.0 ? totals[static_cast<std::size_t>(rank)] / total : 0.0;
      how += fmt::format(" {} {:.1f}%{}", rank, 100.0 * share, rank + 1 < ranks ? "," : "\n");
    }
  }
  return split;
}

ParallelSetup pipelined(const ParallelConfig& config, const Communicator& comm, const layers::LayerList& layers,
                        const RunRequest& request) {
  const bool hybrid = config.kind == StrategyKind::hybrid;
  const int pipelines = hybrid ? config.layout.pipelines : 1;
  const int tensor_ranks = hybrid ? std::max(1, config.tensor_ranks) : 1;
  const int stages = comm.size() / (pipelines * tensor_ranks);
  std::optional<TensorPlan> plan;
  if (tensor_ranks > 1) plan = as_config_error("tp", [&] { return plan_tensor_parallel(layers, tensor_ranks); });
  ParallelSetup setup;
  // The device comes before the strategy: balancing by time measures on it.
  setup.device = resolve_device(request.device, [&](DeviceType type) {
    return type == DeviceType::CUDA ? local_gpu(comm, "Pipeline", "pipeline parallelism")
                                    : optim::Strategy{}.device(type);
  });
  std::string how;
  // A schedule of several chunks per rank cuts the model into that many
  // stages per rank.
  const int chunks =
      as_config_error("chunks", [&] { return chunks_per_rank(config.pipeline.schedule, config.pipeline.chunks); });
  PipelineOptions asked = config.pipeline;
  PipelineCosts measured;
  const std::vector<StageRange> split = choose_stages(config, comm, stages, chunks, layers, request, setup.device,
                                                      plan ? &*plan : nullptr, how, measured);
  if (asked.schedule == PipelineSchedule::ZeroBubbleV && !measured.forward_per_stage.empty()) {
    asked.schedule_costs = measured;
    // What the measured times change, as the simulator sees it on them.
    const ZeroBubbleVChoice choice = choose_zero_bubble_v(stages, micro_batches(asked, stages), measured);
    const PipelineSimulation& kept = choice.kept;
    // The busiest stage's idle share on these times: the bubble unequal
    // chunks leave, which the textbook's equal chunks do not.
    double busiest = 0.0;
    for (const StageSimulation& stage : kept.stages) busiest = std::max(busiest, stage.busy);
    how += fmt::format(
        "zb-v's lists {}: simulated on the chunks' measured times {:.1f} ms a step ({:.1f} ms with "
        "the unit-time lists), the busiest stage idle {:.1f}%\n",
        choice.ordered_by_costs ? "ordered by the measured times" : "of unit times kept", 1e3 * kept.makespan,
        1e3 * choice.unit_makespan, 100.0 * (1.0 - busiest / kept.makespan));
  }
  auto pipeline =
      std::make_shared<Pipeline>(ProcessGrid::split(comm, pipelines, stages, tensor_ranks), split, asked, plan);
  const PipelineOptions& options = pipeline->options();
  setup.model = build_stage(layers, *pipeline, request.weights);
  setup.model->to(setup.device);
  setup.where = setup.device.str();
  setup.stages = fmt::format("{} of {} stages ({}{}, {} micro-batches per batch, weight gradients per {}{}{}), {}",
                             pipelines > 1 ? fmt::format("{} pipelines", pipelines) : std::string("pipeline"),
                             stages * chunks, pipeline_schedule_name(options.schedule),
                             chunks > 1 ? fmt::format(", {} chunks per rank", chunks) : std::string(),
                             options.micro_batches, weight_gradients_name(weight_gradients_of(options)),
                             places_weights(options.schedule) ? ", placed by the schedule" : "",
                             options.recompute ? ", activations recomputed" : "", how);
  if (plan) {
    setup.stages +=
        fmt::format("\neach stage split over tensor groups of {} ranks: {}", tensor_ranks, plan->describe());
  }
  if (hybrid) setup.scope = pipelines > 1 ? fmt::format("{} pipelines", pipelines) : std::string("1 pipeline");
  setup.strategy = std::move(pipeline);
  return setup;
}

// Each rank's slices of the model, split over its tensor group.
ParallelSetup tensor_split(const ParallelConfig& config, const Communicator& comm, const layers::LayerList& layers,
                           const RunRequest& request) {
  const int tensor_ranks = config.tensor_ranks > 0 ? config.tensor_ranks : comm.size();
  const int replicas = comm.size() / tensor_ranks;
  const TensorPlan plan = as_config_error("tp", [&] { return plan_tensor_parallel(layers, tensor_ranks); });
  ProcessGrid grid = ProcessGrid::split(comm, replicas, 1, tensor_ranks);
  auto group = std::make_shared<const TensorGroup>(grid.tensor, config.data.algorithm);
  ParallelSetup setup;
  auto strategy = as_config_error(
      "tp", [&] { return std::make_shared<TensorParallel>(std::move(grid), group, plan, config.data); });
  setup.device = resolve_device(request.device, [&](DeviceType type) { return strategy->device(type); });
  setup.model = build_tensor_parallel(layers, plan, group, request.weights);
  setup.model->to(setup.device);
  setup.where = setup.device.str();
  // A summary would run a forward pass, whose split layers talk to the
  // other ranks: the layers as this rank holds them instead.
  setup.stages = fmt::format("tensor groups of {} ranks, {} replica{}; rank {}'s layers:", tensor_ranks, replicas,
                             replicas == 1 ? "" : "s", comm.rank());
  for (const auto& [name, layer] : setup.model->children())
    setup.stages += fmt::format("\n  {:>3}  {}", name, layer->describe());
  setup.scope = fmt::format("{} ranks", comm.size());
  setup.strategy = std::move(strategy);
  return setup;
}

const std::vector<StrategyKind> kStrategyKinds{
    StrategyKind::none,     StrategyKind::data,   StrategyKind::parameter_server,
    StrategyKind::pipeline, StrategyKind::hybrid, StrategyKind::tensor};

}  // namespace

std::string_view strategy_kind_name(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::none:
      return "none";
    case StrategyKind::data:
      return "data";
    case StrategyKind::parameter_server:
      return "ps";
    case StrategyKind::pipeline:
      return "pipeline";
    case StrategyKind::hybrid:
      return "hybrid";
    case StrategyKind::tensor:
      return "tensor";
  }
  return "?";
}

StrategyKind parse_strategy_kind(std::string_view name) {
  return choice_by_name(name, kStrategyKinds, strategy_kind_name, "parallel strategy");
}

std::vector<StrategyKind> all_strategy_kinds() { return kStrategyKinds; }

bool is_pipelined(StrategyKind kind) { return kind == StrategyKind::pipeline || kind == StrategyKind::hybrid; }

int data_ranks(const ParallelConfig& config, int world_size) {
  const StageLayout& layout = config.layout;
  // What cannot run in one process is refused as such, before any count.
  const bool always_several = config.kind == StrategyKind::data || config.kind == StrategyKind::parameter_server ||
                              config.kind == StrategyKind::tensor;
  const int asked = config.kind == StrategyKind::pipeline ? layout.stages
                    : config.kind == StrategyKind::hybrid ? layout.pipelines * layout.stages
                                                          : 0;
  if (world_size == 1 && (always_several || asked > 1)) {
    require_mpi(config.kind);
    if (always_several) several_ranks(std::nullopt, config.kind);
  }
  switch (config.kind) {
    case StrategyKind::none:
      if (world_size > 1) {
        throw ConfigError(
            fmt::format("started as {} MPI ranks without a parallel strategy: every rank would train "
                        "alone (ask for one, such as data parallelism)",
                        world_size));
      }
      return 1;
    case StrategyKind::data:
      return world_size;
    case StrategyKind::parameter_server:
      if (config.parameter_server.servers < 1 || config.parameter_server.servers >= world_size) {
        throw ConfigError("servers", fmt::format("{} server(s) among {} ranks: at least one server and one worker "
                                                 "are needed",
                                                 config.parameter_server.servers, world_size));
      }
      return world_size - config.parameter_server.servers;
    case StrategyKind::pipeline: {
      const int stages = layout.stages > 0 ? layout.stages : world_size;
      if (stages != world_size) {
        throw ConfigError("stages",
                          fmt::format("{} stages need {} ranks, one per stage; this job has {} (mpiexec -n {})", stages,
                                      stages, world_size, stages));
      }
      return 1;
    }
    case StrategyKind::hybrid:
      if (layout.pipelines < 1 || layout.stages < 1) {
        throw ConfigError(fmt::format("hybrid parallelism needs a pipeline count and a stage count (got {} and {})",
                                      layout.pipelines, layout.stages));
      }
      if (config.tensor_ranks < 0) {
        throw ConfigError("tp", fmt::format("tensor groups of {} ranks (0 or 1: none)", config.tensor_ranks));
      }
      if (const int grid = layout.pipelines * layout.stages * std::max(1, config.tensor_ranks); grid != world_size) {
        const std::string tensor =
            config.tensor_ranks > 1 ? fmt::format(" x {} tensor ranks", config.tensor_ranks) : std::string();
        throw ConfigError(fmt::format("{} pipelines x {} stages{} need {} ranks; this job has {} (mpiexec -n {})",
                                      layout.pipelines, layout.stages, tensor, grid, world_size, grid));
      }
      return layout.pipelines;
    case StrategyKind::tensor: {
      if (config.tensor_ranks < 0) {
        throw ConfigError("tp", fmt::format("a tensor group of {} ranks (0: every rank)", config.tensor_ranks));
      }
      const int tensor_ranks = config.tensor_ranks > 0 ? config.tensor_ranks : world_size;
      if (tensor_ranks < 1 || world_size % tensor_ranks != 0) {
        throw ConfigError("tp", fmt::format("tensor groups of {} ranks do not divide the job's {} ranks (mpiexec -n "
                                            "a multiple of {})",
                                            tensor_ranks, world_size, tensor_ranks));
      }
      return world_size / tensor_ranks;
    }
  }
  return 1;
}

std::optional<Communicator> job_ranks() {
  if (Communicator::launched_by_mpi() && Communicator::world().size() > 1) return Communicator::world();
  return std::nullopt;
}

namespace {

// Data parallelism's `--allreduce auto`: float16 on the wire has the ring
// alone; buckets on GPUs go to NCCL's own allreduce, which knows the
// GPUs' links (NVLink, PCIe, the network) better than a model of two links
// does; otherwise the cost model's fastest for the largest bucket the
// gradients fill (sharded: of the algorithms with halves of their own).
AllreduceChoice data_parallel_allreduce(const Communicator& comm, const DataParallelOptions& options,
                                        const layers::LayerList& layers, const RunRequest& request) {
  if (options.fp16_compression) return {AllreduceAlgorithm::ring, "float16 on the wire: the ring alone carries it"};
  if (request.device.starts_with("cuda")) {
    return {AllreduceAlgorithm::builtin, "gradients on GPUs: NCCL's own allreduce, which knows the GPUs' links"};
  }
  const std::vector<std::size_t> per_layer = layers.parameter_bytes();
  const auto gradient_bytes = static_cast<double>(std::accumulate(per_layer.begin(), per_layer.end(), std::size_t{0}));
  const auto bucket =
      static_cast<double>(options.bucket_bytes > 0 ? options.bucket_bytes : config::fusion_threshold_bytes());
  const std::vector<AllreduceAlgorithm> candidates =
      options.sharding != Sharding::none
          ? std::vector<AllreduceAlgorithm>{AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd}
          : cost::modelled_algorithms();
  return choose_allreduce(comm, std::max(std::min(gradient_bytes, bucket), 4.0), candidates);
}

}  // namespace

ParallelSetup make_setup(const ParallelConfig& config, const std::optional<Communicator>& ranks,
                         const layers::LayerList& layers, const RunRequest& request) {
  if (!config.placement.empty() && config.kind != StrategyKind::none) {
    throw ConfigError("placement", fmt::format("places layers inside one process; it does not combine with the {} "
                                               "strategy",
                                               strategy_kind_name(config.kind)));
  }
  if (config.tensor_ranks != 0 && config.kind != StrategyKind::tensor && config.kind != StrategyKind::hybrid) {
    throw ConfigError("tp", fmt::format("splits layers over tensor groups under the tensor and hybrid strategies, "
                                        "not under {}",
                                        strategy_kind_name(config.kind)));
  }
  const bool automatic =
      (config.kind == StrategyKind::tensor && config.data.algorithm == AllreduceAlgorithm::automatic) ||
      (is_pipelined(config.kind) && config.pipeline.allreduce == AllreduceAlgorithm::automatic);
  if (automatic) {
    throw ConfigError("allreduce", fmt::format("auto chooses data parallelism's allreduce (the data strategy); under "
                                               "{} name one (ring, rhd, tree, naive, shm, hierarchical or builtin)",
                                               strategy_kind_name(config.kind)));
  }
  const bool sharded = config.data.sharding != Sharding::none || config.pipeline.sharding != Sharding::none;
  if (sharded && config.kind != StrategyKind::data && config.kind != StrategyKind::hybrid) {
    const std::string why = config.kind == StrategyKind::none ? "one process has no data-parallel ranks"
                            : config.kind == StrategyKind::parameter_server
                                ? "a parameter server's servers already hold the optimizer state, each its share"
                            : config.kind == StrategyKind::tensor
                                ? "tensor parallelism already splits the state of the layers it splits; its "
                                  "replicas do not shard the rest"
                                : "a single pipeline has no data-parallel ranks (hybrid has)";
    throw ConfigError("shard", fmt::format("shards the state of data-parallel ranks, under the data and hybrid "
                                           "strategies: {}",
                                           why));
  }
  if (config.kind == StrategyKind::hybrid && config.tensor_ranks > 1 && sharded) {
    throw ConfigError("shard",
                      "does not combine with tensor groups: tensor parallelism already splits the state of "
                      "the layers it splits, and the pipelines do not shard the rest");
  }
  if (config.kind == StrategyKind::hybrid && config.pipeline.sharding == Sharding::parameters) {
    throw ConfigError("shard",
                      "parameters (ZeRO stage 3) would gather each stage's parameters for every "
                      "micro-batch's forward and backward: 2M allgathers a step instead of 2; a hybrid "
                      "shards the optimizer state or the gradients (DeepSpeed refuses stages 2 and 3 with "
                      "a pipeline)");
  }
  const int data = data_ranks(config, ranks ? ranks->size() : 1);
  ParallelSetup setup;
  switch (config.kind) {
    case StrategyKind::none:
      setup = one_process(config, layers, request);
      break;
    case StrategyKind::data: {
      const Communicator& comm = several_ranks(ranks, config.kind);
      DataParallelOptions options = config.data;
      std::string chosen;
      if (options.algorithm == AllreduceAlgorithm::automatic) {
        const AllreduceChoice choice = data_parallel_allreduce(comm, options, layers, request);
        options.algorithm = choice.algorithm;
        chosen = fmt::format("allreduce auto: {} ({})", algorithm_name(choice.algorithm), choice.reason);
      }
      setup = whole_model(std::make_shared<DataParallel>(comm, options), layers, request);
      setup.scope = fmt::format("{} ranks", setup.strategy->shard().world);
      setup.allreduce_choice = chosen;
      break;
    }
    case StrategyKind::parameter_server:
      setup = whole_model(as_config_error("servers",
                                          [&] {
                                            return std::make_shared<ParameterServer>(several_ranks(ranks, config.kind),
                                                                                     config.parameter_server);
                                          }),
                          layers, request);
      setup.scope = fmt::format("{} ranks", setup.strategy->shard().world);
      break;
    case StrategyKind::tensor:
      setup = tensor_split(config, several_ranks(ranks, config.kind), layers, request);
      break;
    case StrategyKind::pipeline:
    case StrategyKind::hybrid:
      // With MPI a pipeline of one stage runs in one process too.
      setup = pipelined(config, pipeline_ranks(ranks, config.kind), layers, request);
      break;
  }
  setup.data_ranks = data;
  return setup;
}

}  // namespace ddl::parallel
