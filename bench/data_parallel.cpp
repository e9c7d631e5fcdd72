// Data-parallel scaling efficiency of a bundled model, measured within one
// MPI job in short interleaved blocks, so slow drifts of a shared machine's
// speed hit every configuration alike:
//
//   mpiexec -n 2 build/bench/ddl_bench_data_parallel [--model mnist_cnn]
//       [--batch 128] [--steps 10] [--rounds 12] [--allreduce ring,shm]
//       [--overlap on,off] [--first-bucket-mb 1,25]
//
// Each round runs `steps` training steps (forward, backward, optimizer) of:
//   1 rank       rank 0 alone at the global batch; the others sleep;
//   no comm      every rank on its own at batch/N, no communication: the
//                ceiling the shared cores, caches and memory allow;
//   <algorithm>  DataParallel at batch/N per rank, for each algorithm named,
//                with the buckets reduced during backward (overlap on) and/or
//                all after it (off), and for each size of the first
//                bucket named (default 1 MiB, PyTorch DDP's; 25 makes
//                mnist_cnn's 4.8 MB of gradients one bucket).
// Efficiency = rate / (N x the 1-rank rate) per round; the table gives the
// median over rounds, and the share of DataParallel's step time spent
// waiting for gradients (SyncStatistics). Inputs are random (the speed of a
// step does not depend on the values). With --threads T each rank computes
// with T threads (default 1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ddl/ddl.hpp>
#include <ddl/models/zoo.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>

using namespace ddl;
using namespace ddl::parallel;

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDoneTag = 77;

struct Runner {
  std::shared_ptr<layers::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
  std::shared_ptr<optim::Strategy> strategy;
  optim::Batch batch;

  Runner(const std::string& name, std::int64_t batch_size, std::shared_ptr<optim::Strategy> chosen)
      : model(models::make_model(name)),
        optimizer(std::make_shared<optim::Adadelta>(model->parameters())),
        strategy(chosen ? std::move(chosen) : std::make_shared<optim::Strategy>()) {
    Generator generator(11);
    batch.inputs = uniform({batch_size, 1, 28, 28}, 0.0f, 1.0f, {}, &generator);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(batch_size));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i * 7 % 10);
    batch.targets = from_vector(labels, {batch_size});
    strategy->prepare(*model, optimizer.get());
    seconds(2);  // warm-up: caches, the memory pool, the communication thread
  }

  // Wall time of `steps` training steps.
  double seconds(int steps) {
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) {
      strategy->begin_step(*model);
      strategy->forward_backward(*model, layers::cross_entropy, batch);
      strategy->synchronize_gradients(*model);
      strategy->update(*model, *optimizer);
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
};

// Rank 0 runs `work`; the other ranks sleep until it is done (polling
// every millisecond, so they take no CPU from it).
double on_rank_zero_alone(const Communicator& comm, const std::function<double()>& work) {
  double result = 0.0;
  std::byte token{};
  if (comm.rank() == 0) {
    result = work();
    for (int r = 1; r < comm.size(); ++r) comm.send({&token, 1}, r, kDoneTag);
  } else {
    while (!comm.probe_any(kDoneTag)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    comm.recv({&token, 1}, 0, kDoneTag);
  }
  comm.broadcast_bytes(std::as_writable_bytes(std::span<double>(&result, 1)), 0);
  return result;
}

// The slowest rank's time: the configuration's time.
double slowest(const Communicator& comm, double seconds) {
  std::vector<double> all(static_cast<std::size_t>(comm.size()), 0.0);
  all[static_cast<std::size_t>(comm.rank())] = seconds;
  comm.sum_doubles(all);
  return *std::max_element(all.begin(), all.end());
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"data-parallel scaling efficiency, interleaved within one MPI job", "ddl_bench_data_parallel"};
  std::string model = "mnist_cnn";
  std::int64_t batch = 128;
  int steps = 10, rounds = 12, threads = 1;
  std::vector<std::string> names{"ring", "shm"};
  std::vector<std::string> overlaps{"on"};
  std::vector<double> first_buckets_mb{1.0};
  app.add_option("--model", model, "bundled model (28x28 grey images)")->capture_default_str();
  app.add_option("--batch", batch, "global batch; each of N ranks takes batch/N")->capture_default_str();
  app.add_option("--steps", steps, "training steps per configuration and round")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds; the table gives medians")->capture_default_str();
  app.add_option("--threads", threads, "compute threads per rank")->capture_default_str();
  app.add_option("--allreduce", names, "DataParallel algorithms to compare")->delimiter(',');
  app.add_option("--overlap", overlaps,
                 "reduce buckets during backward (on), after it (off), as DataParallel "
                 "decides (auto), or several (on,off)")
      ->delimiter(',')
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--first-bucket-mb", first_buckets_mb, "sizes of the first gradient bucket to compare, in MiB")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);

  const Communicator world = Communicator::world();
  const int n = world.size();
  if (batch % n != 0) {
    if (world.rank() == 0)
      std::fprintf(stderr, "--batch %lld is not divisible by %d ranks\n", static_cast<long long>(batch), n);
    return 2;
  }
  const std::int64_t per_rank = batch / n;

  Runner solo(model, batch, nullptr);
  Runner alone(model, per_rank, nullptr);
  std::vector<std::pair<std::string, std::unique_ptr<Runner>>> parallel;
  std::vector<std::shared_ptr<DataParallel>> strategies;
  for (const std::string& name : names) {
    for (const double first_mb : first_buckets_mb) {
      for (const std::string& overlap : overlaps) {
        const DataParallelOptions options{.algorithm = parse_allreduce(name),
                                          .first_bucket_bytes = static_cast<std::int64_t>(first_mb * 1048576.0),
                                          .overlap = parse_overlap(overlap)};
        strategies.push_back(std::make_shared<DataParallel>(world, options));
        std::string column = name;
        if (first_buckets_mb.size() > 1) column += fmt::format(", first {:g} MiB", first_mb);
        if (overlaps.size() > 1) column += fmt::format(", overlap {}", overlap);
        parallel.emplace_back(column, std::make_unique<Runner>(model, per_rank, strategies.back()));
      }
    }
  }

  std::vector<std::string> columns{"1 rank", "no comm"};
  for (const auto& [name, runner] : parallel) columns.push_back(name);
  std::vector<std::vector<double>> rates(columns.size()), efficiency(columns.size());
  for (int round = 0; round < rounds; ++round) {
    std::vector<double> rate(columns.size());
    rate[0] = static_cast<double>(batch * steps) / on_rank_zero_alone(world, [&] { return solo.seconds(steps); });
    world.barrier();
    rate[1] = static_cast<double>(batch * steps) / slowest(world, alone.seconds(steps));
    for (std::size_t a = 0; a < parallel.size(); ++a) {
      world.barrier();
      rate[2 + a] = static_cast<double>(batch * steps) / slowest(world, parallel[a].second->seconds(steps));
    }
    for (std::size_t c = 0; c < columns.size(); ++c) {
      rates[c].push_back(rate[c]);
      efficiency[c].push_back(rate[c] / (n * rate[0]));
    }
  }
  if (world.rank() != 0) return 0;
  std::printf("# %s, global batch %lld over %d ranks x %d thread(s); %d rounds of %d steps per configuration\n",
              model.c_str(), static_cast<long long>(batch), n, threads, rounds, steps);
  std::printf("%-34s %12s %12s %12s %12s   %s\n", "config", "samples/s", "efficiency", "eff. min", "eff. max",
              "waiting on gradients");
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const auto [low, high] = std::minmax_element(efficiency[c].begin(), efficiency[c].end());
    std::string waiting = "-";
    if (c >= 2)
      waiting = fmt::format("{:.1f}% of step time", 100.0 * strategies[c - 2]->statistics().fraction_waiting());
    const std::string spread = c == 0 ? fmt::format("{:>12} {:>12} {:>12}", "-", "-", "-")
                                      : fmt::format("{:11.1f}% {:11.1f}% {:11.1f}%", 100.0 * median(efficiency[c]),
                                                    100.0 * *low, 100.0 * *high);
    std::printf("%-34s %12.0f %s   %s\n", columns[c].c_str(), median(rates[c]), spread.c_str(), waiting.c_str());
  }
  return 0;
}
