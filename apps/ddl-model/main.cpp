// ddl-model: the alpha-beta-gamma cost model of ddl's collectives
// (parallel/planning/cost_model.hpp) fitted to this machine and extrapolated to a
// cluster. Under mpiexec it first measures: a ping-pong between ranks gives
// the link's alpha and beta, a local sum gamma, and every allreduce
// algorithm is timed at the job's rank count beside its prediction. Then,
// for a network the user describes, it prints each algorithm's time from 8 to
// 4096 ranks, where the algorithms cross over, the data-parallel efficiency
// of a model of given gradient size and step time, unsharded and under each
// ZeRO stage (with the training state each rank keeps), the pipeline
// bubble of every schedule (simulated; --draw P,M draws their timelines),
// and for a stack of Megatron pairs the fastest data x tensor x
// pipeline grid at each rank count that fits a memory budget.
//
//   mpiexec -n 2 ddl-model --latency 2us --bandwidth 100Gb/s --ranks-per-node 8 --gradient-mb 4.8 --step-ms 45
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ddl/core/atomic_file.hpp>
#include <ddl/core/error.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/parallel/collectives/measure_machine.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/planning/cost_model.hpp>
#include <ddl/parallel/planning/grid_cost.hpp>
#include <ddl/parallel/strategies/pipeline/pipeline_schedule.hpp>
#include <ddl/parallel/strategies/sharding.hpp>

namespace ddl::apps {
namespace {

using parallel::algorithm_name;
using parallel::AllreduceAlgorithm;
using parallel::FittedLink;
using parallel::measure_allreduce;
namespace cost = parallel::cost;

struct Options {
  std::string latency;    // between nodes; default: measured where the job spans nodes, else 2us
  std::string bandwidth;  // between nodes; default: measured where the job spans nodes, else 100Gb/s
  int ranks_per_node = 8;
  std::string node_latency;    // within a node; default: measured, else 1us
  std::string node_bandwidth;  // within a node; default: measured, else 10GB/s
  std::vector<int> ranks{8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  std::vector<double> sizes{4096, 65536, 1 << 20, 16 << 20, 256 << 20};
  std::vector<double> check_sizes{4096, 65536, 1 << 20, 16 << 20};
  double gradient_mb = 0.0;
  double step_ms = 0.0;
  double overlap = 0.0;
  int optimizer_bytes = 8;  // K of ZeRO's formula: Adam's and Adadelta's two float32 values
  int servers = 1;
  std::vector<int> stages{2, 4, 8};
  std::vector<int> micro_batches{1, 2, 4, 8, 16, 32};
  int chunks = 2;           // interleaved-1f1b's chunks per rank in the schedules' table
  std::vector<int> draw;    // "p,M": each schedule's simulated timeline at p stages and M micro-batches
  std::string draw_traces;  // a folder: the drawn timelines as trace files too
  // The 3-D grid's model: a stack of Megatron pairs (parameters from --gradient-mb).
  int pairs = 0;
  double width = 0.0;
  std::int64_t batch = 0;
  double sample_ms = 0.0;
  double activation_kb = 0.0;
  double memory_gb = 0.0;
  double budget = 0.2;
  bool measure = true;
  std::string csv;  // the extrapolated times, one row per ranks, size and algorithm
};

std::string format_bytes(double bytes) {
  if (bytes >= 1 << 30) return fmt::format("{:.3g} GiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return fmt::format("{:.3g} MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:.3g} KiB", bytes / (1 << 10));
  return fmt::format("{:.3g} B", bytes);
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.2f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

std::string describe_link(const cost::Link& link) {
  return fmt::format("alpha {} beta {:.3g} ns/B ({:.3g} GB/s)", format_seconds(link.alpha), link.beta * 1e9,
                     link.beta > 0 ? 1e-9 / link.beta : INFINITY);
}

void print_fit(const std::string& what, const FittedLink& fitted) {
  std::cout << fmt::format("  {:<16} {}; the fit is off by {:.0f}% (median), {:.0f}% (worst) over {} .. {}\n", what,
                           describe_link(fitted.link), 100 * fitted.median_error, 100 * fitted.max_error,
                           format_bytes(fitted.bytes.front()), format_bytes(fitted.bytes.back()));
}

// Predicted against measured at the job's own rank count.
void check_against_measurement(const parallel::Communicator& comm, const cost::Machine& machine, const Options& o) {
  const bool root = comm.rank() == 0;
  std::vector<AllreduceAlgorithm> algorithms = cost::modelled_algorithms();
  if (comm.local_size() < comm.size()) std::erase(algorithms, AllreduceAlgorithm::shm);
  if (root) {
    std::cout << fmt::format("\npredicted / measured allreduce time at {} ranks (ratio = predicted / measured):\n",
                             comm.size());
    std::cout << fmt::format("  {:>9}", "size");
    for (const AllreduceAlgorithm algorithm : algorithms)
      std::cout << fmt::format(" {:>27}", algorithm_name(algorithm));
    std::cout << fmt::format(" {:>10}\n", "builtin");
  }
  std::vector<double> errors;
  std::string worst;
  double worst_error = -1.0;
  for (const double bytes : o.check_sizes) {
    if (root) std::cout << fmt::format("  {:>9}", format_bytes(bytes));
    for (const AllreduceAlgorithm algorithm : algorithms) {
      const double measured = measure_allreduce(comm, algorithm, bytes, o.budget);
      const double predicted = *cost::allreduce_seconds(algorithm, comm.size(), bytes, machine);
      const double error = std::abs(predicted / measured - 1.0);
      errors.push_back(error);
      if (error > worst_error) {
        worst_error = error;
        worst = fmt::format("{} at {}", algorithm_name(algorithm), format_bytes(bytes));
      }
      if (root) {
        std::cout << fmt::format(" {:>10} / {:>9} {:>5.2f}", format_seconds(predicted), format_seconds(measured),
                                 predicted / measured);
      }
    }
    const double builtin = measure_allreduce(comm, AllreduceAlgorithm::builtin, bytes, o.budget);
    if (root) std::cout << fmt::format(" {:>10}\n", format_seconds(builtin));
  }
  std::sort(errors.begin(), errors.end());
  if (root) {
    std::cout << fmt::format(
        "  error |predicted / measured - 1|: median {:.0f}%, worst {:.0f}% ({}); builtin is MPI's own choice, "
        "not modelled\n",
        100 * errors[errors.size() / 2], 100 * worst_error, worst);
  }
}

// The size below which rhd beats the ring at `ranks` (bisection over log
// bytes), or nullopt when one of them wins everywhere from 1 B to 1 GiB.
std::optional<double> crossover(int ranks, const cost::Machine& machine) {
  const auto rhd_wins = [&](double bytes) {
    return *cost::allreduce_seconds(AllreduceAlgorithm::rhd, ranks, bytes, machine) <
           *cost::allreduce_seconds(AllreduceAlgorithm::ring, ranks, bytes, machine);
  };
  double low = 0.0, high = 30.0;  // log2 bytes
  if (!rhd_wins(std::exp2(low)) || rhd_wins(std::exp2(high))) return std::nullopt;
  for (int i = 0; i < 60; ++i) {
    const double middle = (low + high) / 2;
    (rhd_wins(std::exp2(middle)) ? low : high) = middle;
  }
  return std::exp2(high);
}

void print_extrapolation(const cost::Machine& machine, const Options& o) {
  std::cout << fmt::format("\nextrapolated: {} ranks per node; within a node {}; between nodes {}; gamma {:.3g} ns/B\n",
                           machine.ranks_per_node, describe_link(machine.intra_node), describe_link(machine.network),
                           machine.gamma * 1e9);
  for (const double bytes : o.sizes) {
    std::cout << fmt::format("\nallreduce of {} (* the fastest):\n  {:>6}", format_bytes(bytes), "ranks");
    for (const AllreduceAlgorithm algorithm : cost::modelled_algorithms()) {
      std::cout << fmt::format(" {:>11}", algorithm_name(algorithm));
    }
    std::cout << '\n';
    for (const int ranks : o.ranks) {
      std::vector<std::optional<double>> times;
      for (const AllreduceAlgorithm algorithm : cost::modelled_algorithms()) {
        times.push_back(cost::allreduce_seconds(algorithm, ranks, bytes, machine));
      }
      double best = INFINITY;
      for (const auto& time : times) best = time ? std::min(best, *time) : best;
      std::cout << fmt::format("  {:>6}", ranks);
      for (const auto& time : times) {
        std::cout << fmt::format(" {:>11}", time ? format_seconds(*time) + (*time == best ? "*" : " ") : "-  ");
      }
      std::cout << '\n';
    }
  }
  std::cout << "\nwhere recursive halving/doubling stops beating the ring (latency-bound below, bandwidth-bound "
               "above):\n";
  for (const int ranks : o.ranks) {
    const auto size = crossover(ranks, machine);
    std::cout << fmt::format(
        "  {:>6} ranks: {}\n", ranks,
        size ? "rhd is faster below " + format_bytes(*size) : std::string("no crossover between 1 B and 1 GiB"));
  }
}

// ranks,bytes,algorithm,seconds for every point of the extrapolated tables
// (what the lessons plot); written whole, then renamed over `path`.
void write_csv(const cost::Machine& machine, const Options& o) {
  std::string text = "ranks,bytes,algorithm,seconds\n";
  for (const int ranks : o.ranks) {
    for (const double bytes : o.sizes) {
      for (const AllreduceAlgorithm algorithm : cost::modelled_algorithms()) {
        if (const auto seconds = cost::allreduce_seconds(algorithm, ranks, bytes, machine)) {
          text += fmt::format("{},{:.0f},{},{:.9g}\n", ranks, bytes, algorithm_name(algorithm), *seconds);
        }
      }
    }
  }
  write_file_atomically(o.csv, text, "ddl-model --csv");
  std::cout << fmt::format("\nthe extrapolated times: {}\n", o.csv);
}

// The rank counts of the efficiency tables: the small ones this machine
// can measure, then those extrapolated to.
std::vector<int> efficiency_ranks(const Options& o) {
  std::vector<int> ranks{2, 3, 4};
  ranks.insert(ranks.end(), o.ranks.begin(), o.ranks.end());
  return ranks;
}

void print_data_parallel(const cost::Machine& machine, const Options& o) {
  if (o.gradient_mb <= 0.0 || o.step_ms <= 0.0) {
    std::cout << "\n(data-parallel efficiency: give --gradient-mb and --step-ms, e.g. mnist_cnn's 4.8 MB and its "
                 "measured step)\n";
    return;
  }
  const double bytes = o.gradient_mb * 1e6, compute = o.step_ms * 1e-3;
  std::cout << fmt::format(
      "\ndata-parallel efficiency (weak scaling): {:g} MB of gradients, {:g} ms of compute per step, {:.0f}% of "
      "the allreduce hidden behind backward; ps = {} server(s) for the other ranks\n  {:>6}",
      o.gradient_mb, o.step_ms, 100 * o.overlap, o.servers, "ranks");
  for (const AllreduceAlgorithm algorithm : cost::modelled_algorithms()) {
    std::cout << fmt::format(" {:>7}", algorithm_name(algorithm));
  }
  std::cout << fmt::format(" {:>7}\n", "ps");
  std::optional<int> ring_below_90;
  for (const int n : efficiency_ranks(o)) {
    std::cout << fmt::format("  {:>6}", n);
    for (const AllreduceAlgorithm algorithm : cost::modelled_algorithms()) {
      const auto seconds = cost::allreduce_seconds(algorithm, n, bytes, machine);
      if (!seconds) {
        std::cout << fmt::format(" {:>7}", "-");
        continue;
      }
      const double efficiency = cost::data_parallel_efficiency(compute, *seconds, o.overlap);
      if (algorithm == AllreduceAlgorithm::ring && efficiency < 0.9 && !ring_below_90) ring_below_90 = n;
      std::cout << fmt::format(" {:>6.1f}%", 100 * efficiency);
    }
    // The parameter server's workers are the ranks that are not servers.
    const std::string ps =
        n > o.servers
            ? fmt::format("{:.1f}%",
                          100 * cost::data_parallel_efficiency(
                                    compute, cost::parameter_server_seconds(n - o.servers, o.servers, bytes, machine),
                                    o.overlap))
            : "-";
    std::cout << fmt::format(" {:>7}\n", ps);
  }
  std::cout << (ring_below_90 ? fmt::format("  the ring falls below 90% at {} ranks\n", *ring_below_90)
                              : std::string("  the ring stays above 90% up to the largest rank count\n"));
}

// Each ZeRO stage at each rank count: the state a rank keeps (ZeRO's
// formula, sharding.hpp) and the efficiency its communication leaves. The
// ring's reduce-scatter and allgather are its allreduce's two halves, so
// stages 1 and 2 move what unsharded data parallelism moves, but their
// allgather runs after the update, where backward cannot hide it; stage 3
// gathers the parameters before each layer's forward (exposed) and again
// before its backward (hidden like the reduce-scatter, `--overlap`).
void print_sharded(const cost::Machine& machine, const Options& o) {
  if (o.gradient_mb <= 0.0 || o.step_ms <= 0.0) return;  // print_data_parallel said what to give
  const double bytes = o.gradient_mb * 1e6, compute = o.step_ms * 1e-3;
  const auto parameters = static_cast<std::int64_t>(bytes / 4);
  std::cout << fmt::format(
      "\nsharded data parallelism (ZeRO), ring: {} float32 parameters, K = {} bytes of optimizer state each; the "
      "state per rank (stage 3: plus the buckets gathered at the moment) and the efficiency at {:g} ms of compute "
      "per step, {:.0f}% of the communication beside backward hidden\n  {:>6}",
      parameters, o.optimizer_bytes, o.step_ms, 100 * o.overlap, "ranks");
  for (const parallel::Sharding sharding : parallel::all_shardings())
    std::cout << fmt::format(" {:>11}", parallel::sharding_name(sharding));
  std::cout << fmt::format(" {:>8} {:>8} {:>8}\n", "eff. 0", "eff. 1-2", "eff. 3");
  for (const int n : efficiency_ranks(o)) {
    std::cout << fmt::format("  {:>6}", n);
    for (const parallel::Sharding sharding : parallel::all_shardings()) {
      // zero_formula counts float32 state values: one of them, scaled to K bytes.
      const parallel::StateBytes one_value = parallel::zero_formula(sharding, parameters, 1, n);
      const double state = static_cast<double>(one_value.parameters + one_value.gradients) +
                           static_cast<double>(one_value.optimizer) * o.optimizer_bytes / 4.0;
      std::cout << fmt::format(" {:>11}", format_bytes(state));
    }
    const double allreduce = *cost::allreduce_seconds(AllreduceAlgorithm::ring, n, bytes, machine);
    const double allgather = *cost::allgather_seconds(AllreduceAlgorithm::ring, n, bytes, machine);
    const double shown = 1.0 - o.overlap;  // what backward leaves exposed of the communication beside it
    const auto efficiency = [&](double exposed) { return 100 * cost::data_parallel_efficiency(compute, exposed); };
    std::cout << fmt::format(" {:>7.1f}% {:>7.1f}% {:>7.1f}%\n", efficiency(shown * allreduce),
                             efficiency(shown * (allreduce - allgather) + allgather),
                             efficiency(shown * allreduce + allgather));
  }
}

void print_pipeline(const Options& o) {
  std::cout << "\npipeline bubble (p - 1) / (M + p - 1) and speed-up p M / (M + p - 1) over one process, before "
               "messages:\n";
  std::cout << fmt::format("  {:>4}", "M");
  for (const int p : o.stages) std::cout << fmt::format(" {:>22}", fmt::format("p={}: bubble, speed-up", p));
  std::cout << '\n';
  for (const int m : o.micro_batches) {
    std::cout << fmt::format("  {:>4}", m);
    for (const int p : o.stages) {
      std::cout << fmt::format(" {:>13.0f}%, {:>6.2f}", 100 * cost::pipeline_bubble(p, m),
                               cost::pipeline_speedup(p, m));
    }
    std::cout << '\n';
  }
}

// One step of `schedule` on p stages and M micro-batches as the simulator
// runs it on unit times: F = B = W = 1 (per chunk, where a rank holds
// several); a schedule that does not place the weight gradients computes
// them inside B (B = 2), as the textbooks draw it.
struct SimulatedSchedule {
  std::vector<std::vector<parallel::PipelineAction>> actions;
  parallel::PipelineCosts costs;
  parallel::ChunkLayout layout;
};

SimulatedSchedule simulated(parallel::PipelineSchedule schedule, int stages, int micro_batches, int chunks) {
  const bool places = parallel::places_weights(schedule);
  const auto weights = places ? parallel::WeightGradients::per_micro_batch : parallel::WeightGradients::in_backward;
  const int own_chunks = schedule == parallel::PipelineSchedule::Interleaved1F1B ? chunks : 0;
  return {parallel::pipeline_actions(schedule, stages, micro_batches, weights, own_chunks),
          {.forward = 1.0, .backward = places ? 1.0 : 2.0},
          parallel::chunk_layout(schedule)};
}

// A simulated step as a trace, one process per rank, 1 unit = 1 ms: its
// actions named and annotated as the pipeline's own spans are (forward,
// backward, weight gradients; micro-batch, chunk), so a measured
// ddl-train --timeline and the schedule draw alike (bench/plot_pipeline.py).
void write_simulated_trace(const std::string& path, const parallel::PipelineSimulation& simulation) {
  using Kind = parallel::PipelineAction::Kind;
  constexpr double kNanosecondsPerUnit = 1e6;
  std::vector<timeline::ProcessTrace> ranks;
  for (std::size_t r = 0; r < simulation.stages.size(); ++r) {
    timeline::ProcessTrace rank{.process = static_cast<int>(r),
                                .label = fmt::format("stage {} (simulated)", r),
                                .recording = {.threads = {"training"}, .events = {}}};
    for (const parallel::TimedPipelineAction& timed : simulation.stages[r].timeline) {
      const Kind kind = timed.action.kind;
      timeline::Event event{.name = kind == Kind::Forward    ? "forward"
                                    : kind == Kind::Backward ? "backward"
                                                             : "weight gradients",
                            .category = "compute",
                            .begin_ns = std::llround(timed.start * kNanosecondsPerUnit),
                            .end_ns = std::llround(timed.end * kNanosecondsPerUnit),
                            .args = {{"micro-batch", std::int64_t{timed.action.micro_batch}}}};
      if (simulation.chunks > 1) event.args.push_back({"chunk", std::int64_t{timed.action.chunk}});
      rank.recording.events.push_back(std::move(event));
    }
    ranks.push_back(std::move(rank));
  }
  timeline::write_chrome_trace(path, ranks, {{"simulated", std::string("1 unit = 1 ms")}});
}

// Every schedule's bubble in back-to-back steps and stage 0's peak of held
// activations, simulated, and (--draw) each one's timeline.
void print_schedules(const Options& o) {
  std::cout << fmt::format(
      "\npipeline schedules simulated on unit times (F = B = W = 1 per stage or chunk, W inside B where a schedule "
      "does not place it), back-to-back steps: the bubble, and stage 0's peak of micro-batches held (chunks of "
      "them for interleaved-1f1b with {} chunks per rank and zb-v):\n",
      o.chunks);
  std::cout << fmt::format("  {:<17} {:>4}", "schedule", "M");
  for (const int p : o.stages) std::cout << fmt::format(" {:>16}", fmt::format("p={}", p));
  std::cout << '\n';
  for (const parallel::PipelineSchedule schedule : parallel::all_pipeline_schedules()) {
    for (const int m : o.micro_batches) {
      std::cout << fmt::format("  {:<17} {:>4}", parallel::pipeline_schedule_name(schedule), m);
      for (const int p : o.stages) {
        const SimulatedSchedule run = simulated(schedule, p, m, o.chunks);
        const parallel::PipelineSimulation one = parallel::simulate_pipeline(run.actions, run.costs, run.layout);
        const double step = parallel::steady_step_time(run.actions, run.costs, run.layout);
        std::cout << fmt::format(" {:>9.1f}%, {:>4}", 100.0 * (1.0 - one.stages[0].busy / step),
                                 one.stages[0].peak_activations);
      }
      std::cout << '\n';
    }
  }
  if (o.draw.empty()) return;
  const int p = o.draw[0], m = o.draw[1];
  for (const parallel::PipelineSchedule schedule : parallel::all_pipeline_schedules()) {
    const SimulatedSchedule run = simulated(schedule, p, m, o.chunks);
    const parallel::PipelineSimulation one = parallel::simulate_pipeline(run.actions, run.costs, run.layout);
    std::cout << fmt::format("\n{} on {} stages, {} micro-batches (one step; {}; Fm.c: chunk c's):\n{}",
                             parallel::pipeline_schedule_name(schedule), p, m,
                             parallel::places_weights(schedule) ? "F = B = W = 1" : "F = 1, B = 2 with W",
                             parallel::render_timeline(one));
    if (!o.draw_traces.empty()) {
      std::filesystem::create_directories(o.draw_traces);
      write_simulated_trace(fmt::format("{}/{}.json", o.draw_traces, parallel::pipeline_schedule_name(schedule)), one);
    }
  }
  if (!o.draw_traces.empty())
    std::cout << fmt::format("\nthe timelines as trace files: {}/<schedule>.json\n", o.draw_traces);
}

// The fastest data x tensor x pipeline grid at each rank count that fits
// the memory, its step by kind, and data parallelism alone beside it.
void print_grid(const cost::Machine& machine, const Options& o) {
  if (o.pairs <= 0 || o.width <= 0.0 || o.batch <= 0 || o.sample_ms <= 0.0 || o.gradient_mb <= 0.0) {
    std::cout << "\n(the 3-D grid: give --gradient-mb, --pairs, --width, --batch and --sample-ms, e.g. wide_mlp's "
                 "416 MB, 4 pairs of width 4096, batch 1024 and its measured time per sample)\n";
    return;
  }
  const cost::GridModel model{.parameters = o.gradient_mb * 1e6 / 4,
                              .sample_seconds = o.sample_ms * 1e-3,
                              .width = o.width,
                              .pairs = o.pairs,
                              .activation_bytes = o.activation_kb * 1e3,
                              .optimizer_bytes = o.optimizer_bytes};
  const double memory = o.memory_gb * 1e9;
  // Megatron's rule: a tensor group talks every layer, so it stays in a node.
  const cost::GridChoices choices{
      .micro_batches = o.micro_batches, .max_tensor = o.ranks_per_node, .memory_bytes = memory};
  std::cout << fmt::format(
      "\n3-D grid (dp x tp x pp, M micro-batches; ring, {:.0f}% of the gradient allreduce hidden): {} pairs of "
      "width {:g}, {:g} M parameters, batch {}, {:g} ms per sample in one process, {}; the fastest grid with tensor "
      "groups inside a node{}\n"
      "  {:>6} {:>20} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}   {}\n",
      100 * o.overlap, o.pairs, o.width, model.parameters / 1e6, o.batch, o.sample_ms,
      o.activation_kb > 0 ? fmt::format("{:g} kB of activations per sample", o.activation_kb)
                          : std::string("activations not counted"),
      memory > 0 ? fmt::format(" within {:g} GB per rank", o.memory_gb) : std::string(), "ranks", "grid", "step",
      "samples/s", "compute", "bubble", "tensor", "pipeline", "data", "memory", "data parallelism alone");
  for (const int n : efficiency_ranks(o)) {
    const auto best = cost::best_grid(n, model, o.batch, machine, choices, AllreduceAlgorithm::ring, o.overlap);
    std::string alone = "-";
    if (n <= o.batch) {
      const cost::GridCost data =
          cost::grid_cost(model, {n, 1, 1, 1}, o.batch, machine, AllreduceAlgorithm::ring, o.overlap);
      alone = fmt::format("{}, {}{}", format_seconds(data.step()), format_bytes(data.memory()),
                          memory > 0 && data.memory() > memory ? " (does not fit)" : "");
    }
    if (!best) {
      std::cout << fmt::format("  {:>6} {:>20}   {}\n", n, "none fits", alone);
      continue;
    }
    const cost::GridCost c = cost::grid_cost(model, *best, o.batch, machine, AllreduceAlgorithm::ring, o.overlap);
    const auto part = [](double seconds) { return seconds > 0.0 ? format_seconds(seconds) : std::string("-"); };
    std::cout << fmt::format("  {:>6} {:>20} {:>10} {:>11.0f} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}   {}\n", n,
                             best->str(), format_seconds(c.step()), static_cast<double>(o.batch) / c.step(),
                             part(c.compute), part(c.bubble), part(c.tensor), part(c.pipeline), part(c.data),
                             format_bytes(c.memory()), alone);
  }
}

int run(const Options& o) {
  const bool under_mpi = parallel::Communicator::launched_by_mpi();
  std::optional<parallel::Communicator> comm;
  if (under_mpi) comm = parallel::Communicator::world();
  const bool root = !comm || comm->rank() == 0;
  // The links the user gives, read before anything is measured.
  const auto seconds_or = [](const std::string& text, double fallback) {
    return text.empty() ? fallback : cost::parse_seconds(text);
  };
  const auto beta_or = [](const std::string& text, double fallback) {
    return text.empty() ? fallback : 1.0 / cost::parse_bandwidth(text);
  };
  const cost::Link network{seconds_or(o.latency, 2e-6), beta_or(o.bandwidth, 8.0 / 100e9)};
  const cost::Link node{seconds_or(o.node_latency, 1e-6), beta_or(o.node_bandwidth, 1.0 / 10e9)};
  cost::Machine machine;
  machine.ranks_per_node = o.ranks_per_node;
  machine.network = network;
  machine.intra_node = node;
  if (root)
    std::cout << "ddl-model: the alpha-beta-gamma cost model of ddl's collectives (parallel/planning/cost_model.hpp)\n";
  const bool measuring = o.measure && comm && comm->size() >= 2;
  if (measuring) {
    const parallel::MeasuredMachine measured = parallel::measure_machine(*comm, o.budget);
    if (root) {
      std::cout << fmt::format("\nmeasured here ({} ranks, {} per node):\n", comm->size(), comm->local_size());
      print_fit("within a node", measured.intra_node);
      if (measured.network) print_fit("between nodes", *measured.network);
      std::cout << fmt::format("  {:<16} gamma {:.3g} ns/B ({:.3g} GB/s of dst += src at 16 MiB)\n", "reduction",
                               measured.machine.gamma * 1e9, 1e-9 / measured.machine.gamma);
      std::cout << fmt::format("  {:<16} {}\n", "node barrier", format_seconds(measured.machine.barrier));
    }
    check_against_measurement(*comm, measured.machine, o);
    // The measured links stand unless the user gave them.
    machine.intra_node = {seconds_or(o.node_latency, measured.machine.intra_node.alpha),
                          beta_or(o.node_bandwidth, measured.machine.intra_node.beta)};
    if (measured.network) {
      machine.network = {seconds_or(o.latency, measured.machine.network.alpha),
                         beta_or(o.bandwidth, measured.machine.network.beta)};
    }
    machine.gamma = measured.machine.gamma;
    machine.barrier = measured.machine.barrier;
  } else if (root) {
    std::cout << "\n(not measured: run under mpiexec with 2 or more ranks to fit the model to this machine and "
                 "check it; the intra-node link and gamma below are defaults)\n";
    machine.gamma = 0.1e-9;
    machine.barrier = 1e-6;
  }
  if (root) {
    print_extrapolation(machine, o);
    if (!o.csv.empty()) write_csv(machine, o);
    print_data_parallel(machine, o);
    print_sharded(machine, o);
    print_pipeline(o);
    print_schedules(o);
    print_grid(machine, o);
  }
  return 0;
}

}  // namespace
}  // namespace ddl::apps

int main(int argc, char** argv) {
  CLI::App app{"The alpha-beta-gamma cost model of ddl's collectives, fitted here and extrapolated", "ddl-model"};
  ddl::apps::Options o;
  app.add_option("--latency", o.latency,
                 "Network latency between nodes (2us, 1.5ms, ...; default: measured when the job spans nodes, else "
                 "2us)");
  app.add_option("--bandwidth", o.bandwidth,
                 "Network bandwidth between nodes per rank (100Gb/s, 12GB/s, ...; default: measured when the job "
                 "spans nodes, else 100Gb/s)");
  app.add_option("--ranks-per-node", o.ranks_per_node, "Ranks on each node of the extrapolated cluster")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--node-latency", o.node_latency, "Latency within a node (default: measured, else 1us)");
  app.add_option("--node-bandwidth", o.node_bandwidth, "Bandwidth within a node (default: measured, else 10GB/s)");
  app.add_option("--ranks", o.ranks, "Rank counts to extrapolate to")->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--sizes", o.sizes, "Allreduce sizes in bytes for the extrapolated tables")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--check-sizes", o.check_sizes, "Sizes in bytes measured against the model here")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--gradient-mb", o.gradient_mb, "Data parallelism: the model's gradient megabytes (1e6 bytes)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--step-ms", o.step_ms, "Data parallelism: the compute time of one step at the per-rank batch")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--overlap", o.overlap, "Data parallelism: the fraction of the allreduce hidden behind backward")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--optimizer-bytes", o.optimizer_bytes,
                 "Sharded data parallelism: bytes of optimizer state per parameter (K of ZeRO's formula: 4 for SGD "
                 "with momentum or Adagrad, 8 for Adam or Adadelta)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--servers", o.servers, "Parameter servers in the data-parallel table")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--stages", o.stages, "Pipeline stage counts")->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--micro-batches", o.micro_batches, "Pipeline micro-batch counts")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--chunks", o.chunks, "Pipeline schedules: interleaved-1f1b's chunks per rank")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  app.add_option("--draw", o.draw,
                 "Pipeline schedules: draw each one's simulated timeline at P stages and M "
                 "micro-batches (\"P,M\")")
      ->delimiter(',')
      ->expected(2)
      ->check(CLI::PositiveNumber);
  app.add_option("--draw-traces", o.draw_traces,
                 "Pipeline schedules, with --draw: also write each drawn timeline to DIR/<schedule>.json, a trace "
                 "file as ddl-train --timeline writes (1 unit = 1 ms), for bench/plot_pipeline.py or a trace viewer")
      ->needs("--draw");
  app.add_option("--pairs", o.pairs,
                 "3-D grid: the model's Megatron pairs (two Dense layers each, split by tensor parallelism)")
      ->check(CLI::PositiveNumber);
  app.add_option("--width", o.width,
                 "3-D grid: floats per sample a pair's allreduce and a stage boundary carry (the pairs' width)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "3-D grid: the global batch (samples per step)")->check(CLI::PositiveNumber);
  app.add_option("--sample-ms", o.sample_ms, "3-D grid: one sample's forward and backward in one process (ms)")
      ->check(CLI::PositiveNumber);
  app.add_option("--activation-kb", o.activation_kb,
                 "3-D grid: kB per sample the whole model keeps for backward (default: not counted)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--memory-gb", o.memory_gb, "3-D grid: memory per rank the grid must fit (default: any)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--budget", o.budget, "Seconds spent measuring each point")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--csv", o.csv, "Also write the extrapolated times to this CSV file (ranks,bytes,algorithm,seconds)");
  app.add_flag("!--no-measure", o.measure, "Do not measure: the model with the given or default links only");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int printed = app.exit(error);              // the message, or --help's text
    return error.get_exit_code() == 0 ? printed : 2;  // a usage error, as a bad unit is
  }
  try {
    return ddl::apps::run(o);
  } catch (const std::exception& error) {
    std::cerr << "ddl-model: error: " << error.what() << '\n';
    return 2;
  }
}
