// ddl-train: trains a bundled model from the command line (Keras' model.fit
// as a program). Run `ddl-train --help` for every option and its default.
// Exit codes: 0 done, 1 a failure while training, 2 a bad command line or
// unreadable data (one line on stderr, no stack trace).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ddl/core/config.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/error.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/layers/summary.hpp>
#include <ddl/models/data/data_loader.hpp>
#include <ddl/models/zoo.hpp>
#include <ddl/optim/adadelta.hpp>
#include <ddl/optim/adagrad.hpp>
#include <ddl/optim/adam.hpp>
#include <ddl/optim/engine/callbacks.hpp>
#include <ddl/optim/engine/loggers.hpp>
#include <ddl/optim/engine/trainer.hpp>
#include <ddl/optim/schedule.hpp>
#include <ddl/optim/sgd.hpp>
#include <ddl/parallel/communication/timeline_gather.hpp>
#include <ddl/parallel/config.hpp>
#include <ddl/parallel/setup.hpp>

#include "curve_plot.hpp"
#include "options.hpp"
#include "resume_guard.hpp"
#include "search.hpp"
#include "start_up.hpp"
#include "task.hpp"

namespace ddl::apps {
namespace {

// Every DDL_* variable, read now: a bad value is a usage error before any
// rank waits for another.
void check_environment() {
  try {
    config::check_environment();
    parallel::config::check_environment();
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
}

// --device's text, checked before any rank waits for another: a device
// this machine has, or a type alone (which the parallel setup resolves to
// one of this type, so the type must have one).
void check_device_option(const std::string& text) {
  try {
    check_device_exists(Device::parse(text));
  } catch (const Error& error) {
    throw UsageError(fmt::format("--device {}: {}", text, error.what()));
  }
}

// The directory an output file goes into, tried before training rather
// than when the file is written at the end.
void check_output_directory(const std::string& path, const char* option) {
  const std::filesystem::path file = std::filesystem::absolute(path);
  if (std::filesystem::is_directory(file)) throw UsageError(fmt::format("{} {}: is a directory", option, path));
  const std::filesystem::path directory = file.parent_path();
  if (!std::filesystem::is_directory(directory)) {
    throw UsageError(fmt::format("{} {}: the directory {} does not exist", option, path, directory.string()));
  }
  if (::access(directory.c_str(), W_OK) != 0) {
    throw UsageError(fmt::format("{} {}: the directory {} is not writable", option, path, directory.string()));
  }
}

std::shared_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, double lr, std::vector<Tensor> params) {
  if (o.optimizer == "sgd") {
    return std::make_shared<optim::SGD>(
        std::move(params),
        optim::SgdOptions{.lr = lr, .momentum = o.momentum, .nesterov = o.nesterov, .weight_decay = o.weight_decay});
  }
  if (o.optimizer == "adam") {
    optim::AdamOptions options;
    options.lr = lr;
    options.weight_decay = o.weight_decay;
    return std::make_shared<optim::Adam>(std::move(params), options);
  }
  if (o.optimizer == "adagrad") {
    optim::AdagradOptions options;
    options.lr = lr;
    options.weight_decay = o.weight_decay;
    return std::make_shared<optim::Adagrad>(std::move(params), options);
  }
  optim::AdadeltaOptions options;
  options.lr = lr;
  options.weight_decay = o.weight_decay;
  return std::make_shared<optim::Adadelta>(std::move(params), options);
}

// The --lr-schedule and --warmup-epochs as one per-step schedule from `lr`
// (null when the rate stays constant).
std::shared_ptr<const optim::LrSchedule> make_schedule(const TrainOptions& o, double lr, std::int64_t steps_per_epoch) {
  std::shared_ptr<const optim::LrSchedule> schedule;
  if (o.lr_schedule == "step") {
    schedule = std::make_shared<optim::StepLr>(lr, o.lr_step_epochs * steps_per_epoch);
  } else if (o.lr_schedule == "cosine") {
    schedule = std::make_shared<optim::CosineLr>(lr, o.epochs * steps_per_epoch);
  }
  if (o.warmup_epochs > 0.0) {
    if (!schedule) schedule = std::make_shared<optim::ConstantLr>(lr);
    const auto warmup_steps = static_cast<std::int64_t>(o.warmup_epochs * static_cast<double>(steps_per_epoch));
    schedule = std::make_shared<optim::LinearWarmup>(schedule, std::max<std::int64_t>(warmup_steps, 1));
  }
  return schedule;
}

// The ranks one training run spans: every rank of the job (mpiexec's), or
// under --search the group of ranks this one trains its configurations
// with; none for a process that trains alone.
using Ranks = std::optional<parallel::Communicator>;

// The start-up every rank goes through before training: its command line,
// environment, device and data are checked, and under mpiexec the ranks
// agree that all went well and that they train the same thing, so that a
// mistake on one rank becomes the same error on every rank before any of
// them waits for the others.
struct StartUp {
  Task task;
  std::vector<std::string> fingerprint;  // of the data, where ranks compare it
};

StartUp start_up(const CLI::App& app, TrainOptions& o, std::string problem, const Ranks& job) {
  bool usage = !problem.empty();
  std::optional<Task> loaded;
  if (problem.empty()) {
    try {
      check_environment();
      resolve_defaults(o);
      check_device_option(o.device);
      if (o.threads > 0) set_num_threads(o.threads);
      if (!o.precision.empty()) {
        set_cpu_precision(o.precision == "bf16" ? config::CpuPrecision::BFloat16 : config::CpuPrecision::Float32);
      }
      loaded = make_task(o);
    } catch (const UsageError& error) {
      problem = error.what();
      usage = true;
    } catch (const std::exception& error) {
      problem = error.what();
    }
  }
  std::vector<std::string> fingerprint;
  if (job) {
    agree_start_up(*job, problem, usage);
    fingerprint = data_fingerprint(*loaded);
    std::vector<std::string> settings = shared_settings(app);
    settings.insert(settings.end(), fingerprint.begin(), fingerprint.end());
    agree_settings(*job, settings);
  }
  if (!problem.empty()) {
    if (usage) throw UsageError(problem);
    throw std::runtime_error(problem);
  }
  return {std::move(*loaded), std::move(fingerprint)};
}

// The parallel module's errors for a configuration that does not fit are
// the command line's, named by the option that set what is at fault
// ("--placement: ...", "--parallel hybrid: 3 pipelines x 2 stages need ...").
// Every rank decides them alike from the settings all agreed on, so rank 0
// alone says what is wrong.
template <class Call>
auto usage_errors_of(const TrainOptions& o, const Ranks& job, Call call) {
  try {
    try {
      return call();
    } catch (const parallel::ConfigError& error) {
      std::string option = fmt::format("--parallel {}", parallel::strategy_kind_name(o.parallel));
      if (error.setting.starts_with("device")) option = "--" + error.setting;  // "--device cuda"
      if (error.setting == "stages") option = o.parallel == parallel::StrategyKind::hybrid ? "--pp" : "--stages";
      for (const char* setting : {"placement", "split", "servers", "balance", "shard", "tp"}) {
        if (error.setting == setting) option = fmt::format("--{}", setting);
      }
      throw UsageError(fmt::format("{}: {}", option, error.reason));
    }
  } catch (const UsageError& error) {
    throw AgreedError(fmt::format("{} (see --help)", error.what()), 2, !job || job->rank() == 0);
  }
}

// --recompute's layer ranges on the model: "all", or "2-5,8" by index or
// name (Sequential::range_of); a range the model lacks, or out of order, is
// a UsageError naming it.
void recompute_layers(layers::Sequential& model, const std::string& text) {
  std::vector<layers::Sequential::LayerRange> ranges;
  try {
    if (text == "all") {
      ranges.emplace_back(0, model.size() - 1);
    } else {
      for (std::size_t begin = 0; begin <= text.size();) {
        const std::size_t comma = std::min(text.find(',', begin), text.size());
        const std::string part = text.substr(begin, comma - begin);
        ranges.push_back(model.range_of(part, fmt::format("--recompute {}: '{}'", text, part)));
        begin = comma + 1;
      }
    }
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  try {
    model.recompute(std::move(ranges));
  } catch (const Error& error) {
    throw UsageError(fmt::format("--recompute {}: {}", text, error.what()));
  }
}

// The run's header: what trains on what, how it is spread, and on what.
std::string header(const TrainOptions& o, const Task& task, const parallel::ParallelSetup& setup,
                   const optim::Optimizer& optimizer, double lr, std::int64_t batch) {
  std::vector<std::string> parts;
  parts.push_back(o.scale_lr == "none" ? fmt::format("{} (lr {:g})", optimizer.name(), lr)
                                       : fmt::format("{} (lr {:g}: {:g} scaled by --scale-lr {} from batch {} to {})",
                                                     optimizer.name(), lr, *o.lr, o.scale_lr, o.lr_batch, batch));
  parts.push_back(o.accumulate > 1 ? fmt::format("batch {} x {} accumulated per step", batch, o.accumulate)
                                   : fmt::format("batch {}", batch));
  const std::string spread = setup.strategy->describe(batch / setup.data_ranks);
  if (!spread.empty()) parts.push_back(spread);
  if (!setup.allreduce_choice.empty()) parts.push_back(setup.allreduce_choice);
  if (!setup.model->recomputed().empty() && !parallel::is_pipelined(o.parallel)) {
    std::vector<std::string> ranges;
    for (const auto& [first, last] : setup.model->recomputed()) {
      ranges.push_back(first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
    }
    parts.push_back(fmt::format("recomputing layers {}", fmt::join(ranges, ",")));
  }
  parts.push_back(setup.where);
  std::string threads = fmt::format("{} thread(s)", config::num_threads());
  if (config::cpu_precision() == config::CpuPrecision::BFloat16) threads += ", bf16 mixed precision";
  // On a GPU, which convolution algorithms (DDL_CUDA_CONV): results repeat
  // bit for bit only with the deterministic ones.
  if (setup.device.is_cuda() || o.placement.find("cuda") != std::string::npos) {
    switch (config::cuda_convolution()) {
      case config::CudaConvolution::Deterministic:
        threads += ", deterministic cuDNN convolutions";
        break;
      case config::CudaConvolution::Fastest:
        threads += ", cuDNN's fastest convolutions (DDL_CUDA_CONV=fastest)";
        break;
      case config::CudaConvolution::Benchmark:
        threads += ", cuDNN convolutions timed at first use (DDL_CUDA_CONV=benchmark)";
        break;
    }
  }
  parts.push_back(threads);
  parts.push_back(fmt::format("seed {}", o.seed));
  return fmt::format("ddl-train: {} on {}\n{}\n\n", o.model, task.description, fmt::join(parts, ", "));
}

// What a training run reports: its final line (the test metrics) and the
// monitored metric of its last epoch, on the rank that prints.
struct RunResult {
  std::string report;
  double seconds = 0.0;
  std::string monitor;  // the metric "best" refers to
  std::optional<double> monitored;
};

RunResult run(const CLI::App& app, TrainOptions& o, std::string problem, const Ranks& job) {
  StartUp started = start_up(app, o, std::move(problem), job);
  const Task& task = started.task;
  std::vector<std::string>& fingerprint = started.fingerprint;

  // What runs, from what was asked: the parallel configuration, the batch
  // and learning rate once spread over the ranks that share each batch.
  const parallel::ParallelConfig config = parallel_config(o);
  const int data_ranks = usage_errors_of(o, job, [&] { return parallel::data_ranks(config, job ? job->size() : 1); });
  const std::int64_t batch = usage_errors_of(o, job, [&] { return global_batch(o, data_ranks); });
  const double lr = effective_lr(o, batch);
  const auto dims = task.train.inputs.shape().to_vector();
  const Shape sample_shape(std::vector<std::int64_t>(dims.begin() + 1, dims.end()));

  Generator weights(o.seed);
  manual_seed(o.seed ^ 0x9E3779B97F4A7C15ull);  // dropout's stream, apart from the weights'
  const parallel::ParallelSetup setup = usage_errors_of(o, job, [&] {
    return parallel::make_setup(config, job, models::model_layers(o.model),
                                {.sample_shape = sample_shape,
                                 .batch = batch,
                                 .device = o.device,
                                 .weights = &weights,
                                 .progress = o.quiet ? nullptr : &std::cout});
  });
  const auto& strategy = setup.strategy;
  const auto& model = setup.model;
  if (!o.recompute.empty() && !parallel::is_pipelined(o.parallel)) {
    usage_errors_of(o, job, [&] {
      recompute_layers(*model, o.recompute);
      return 0;
    });
  }
  const bool root = strategy->is_root();
  const auto optimizer = make_optimizer(o, lr, model->parameters());  // its state on each parameter's device

  models::DataLoaderOptions train_options;
  train_options.batch_size = batch / data_ranks;
  train_options.shuffle = true;
  train_options.seed = o.seed;
  train_options.prefetch = o.prefetch;
  train_options.device = setup.device;
  train_options.normalization = task.normalization;
  models::DataLoader train(task.train, train_options);
  models::DataLoaderOptions test_options = train_options;
  test_options.shuffle = false;
  test_options.batch_size = std::max<std::int64_t>(batch / data_ranks, 500);  // evaluation holds no graph
  models::DataLoader test(task.test, test_options);

  optim::TrainerOptions trainer_options;
  trainer_options.metrics = task.metrics;
  trainer_options.classes = task.classes;
  trainer_options.verbosity = o.quiet ? optim::Verbosity::quiet : optim::Verbosity::progress;
  trainer_options.strategy = strategy;
  trainer_options.batches_per_step = o.accumulate;
  trainer_options.on_non_finite =
      o.on_nonfinite == "skip" ? optim::TrainerOptions::OnNonFinite::skip : optim::TrainerOptions::OnNonFinite::stop;
  trainer_options.divergence_factor = o.divergence_factor;
  optim::Trainer trainer(model, task.loss, optimizer, trainer_options);

  optim::FitOptions fit;
  fit.epochs = o.epochs;
  fit.validation = o.validate ? &test : nullptr;
  const std::string monitor = o.validate ? task.monitor : "loss";
  const std::int64_t batches_per_epoch = train.batches_per_epoch(strategy->shard());
  const std::int64_t steps_per_epoch = (batches_per_epoch + o.accumulate - 1) / o.accumulate;
  if (const auto schedule = make_schedule(o, lr, steps_per_epoch)) {
    fit.callbacks.push_back(std::make_shared<optim::LrScheduler>(schedule, optim::LrScheduler::Unit::step));
  }
  if (o.early_stopping > 0) {
    fit.callbacks.push_back(std::make_shared<optim::EarlyStopping>(
        optim::EarlyStoppingOptions{.monitor = monitor, .patience = o.early_stopping}));
  }
  std::shared_ptr<optim::ModelCheckpoint> checkpoints;
  if (!o.checkpoint_dir.empty()) {
    if (fingerprint.empty()) fingerprint = data_fingerprint(task);
    fit.callbacks.push_back(std::make_shared<ResumeGuard>(
        std::vector<std::pair<std::string, std::string>>{{"--batch-size", std::to_string(batch)},
                                                         {"--accumulate", std::to_string(o.accumulate)},
                                                         {"--seed", std::to_string(o.seed)},
                                                         {"data-parallel ranks", std::to_string(data_ranks)},
                                                         {"training data", fingerprint.front()}},
        o.resume_changed));
    checkpoints = std::make_shared<optim::ModelCheckpoint>(optim::ModelCheckpointOptions{
        .directory = o.checkpoint_dir, .monitor = monitor, .every_steps = o.checkpoint_every_steps});
    fit.callbacks.push_back(checkpoints);
  }
  std::vector<std::shared_ptr<optim::FileLogger>> logs;
  if (!o.log_csv.empty()) logs.push_back(std::make_shared<optim::CsvLogger>(o.log_csv, o.resume));
  if (!o.log_jsonl.empty()) logs.push_back(std::make_shared<optim::JsonLinesLogger>(o.log_jsonl, o.resume));
  fit.callbacks.insert(fit.callbacks.end(), logs.begin(), logs.end());
  if (!o.plot.empty()) {
    fit.callbacks.push_back(std::make_shared<CurvePlot>(o.plot, fmt::format("{} on {}", o.model, task.description)));
  }
  // Rank 0's files are tried now, not after the first epoch's work: the
  // checkpoint directory written to, the logs opened and locked.
  problem.clear();
  std::vector<std::string> stale;
  if (root) {
    try {
      if (checkpoints) stale = checkpoints->prepare_directory();
      for (const auto& log : logs) log->open();
      if (!o.timeline.empty()) check_output_directory(o.timeline, "--timeline");
      if (!o.plot.empty()) {
        check_output_directory(o.plot, "--plot");
        if (!gnuplot_available())
          throw UsageError("--plot needs gnuplot on PATH (Debian: apt-get install gnuplot-nox)");
      }
    } catch (const std::exception& error) {
      problem = error.what();
    }
  }
  if (job) agree_start_up(*job, problem, true);
  if (!problem.empty()) throw UsageError(problem);

  if (!o.quiet && root) {
    std::cout << header(o, task, setup, *optimizer, lr, batch);
    // A pipeline stage holds its own layers alone: the stage table stands
    // for the summary.
    std::cout << (setup.stages.empty() ? layers::summary(*model, sample_shape) : setup.stages) << '\n';
  }
  if (!stale.empty()) {
    trainer.print(fmt::format("Removed {} temporary checkpoint file(s) that killed runs left: {}", stale.size(),
                              fmt::join(stale, ", ")));
  }
  const auto last = std::filesystem::path(o.checkpoint_dir) / "last.ckpt";
  if (o.resume) {
    // Every rank reads the checkpoint: one that cannot, or that reads
    // another epoch, stops them all.
    problem.clear();
    const bool found = std::filesystem::exists(last);
    try {
      if (found) trainer.load_checkpoint(last.string());
    } catch (const std::exception& error) {
      problem = error.what();
    }
    if (job) {
      agree_start_up(*job, problem, false);
      agree_settings(*job, {fmt::format("resumed after epoch {} and {} batches (step {})", trainer.epoch(),
                                        trainer.epoch_batches(), trainer.step())});
    }
    if (!problem.empty()) throw std::runtime_error(problem);
    const std::string where = trainer.epoch_batches() > 0 ? fmt::format("in epoch {} after batch {}",
                                                                        trainer.epoch() + 1, trainer.epoch_batches())
                                                          : fmt::format("after epoch {}", trainer.epoch());
    trainer.print(found ? fmt::format("Resumed from {} {} (step {})", last.string(), where, trainer.step())
                        : fmt::format("No checkpoint at {}: starting from scratch", last.string()));
  }

  if (!o.timeline.empty()) timeline::start({.per_layer = o.timeline_layers});
  const auto start = std::chrono::steady_clock::now();
  const optim::History history = trainer.fit(train, fit);
  const timeline::Recording recording = o.timeline.empty() ? timeline::Recording{} : timeline::stop();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Training throughput over the epochs of this run, validation excluded.
  double samples = 0.0, training_seconds = 0.0;
  for (const optim::Logs& logs : history.epochs) {
    const auto epoch_samples = static_cast<double>(train.samples_per_epoch());
    samples += epoch_samples;
    training_seconds += epoch_samples / logs.at("samples_per_s");
  }
  const std::string report = task.report(trainer, test);  // collective: every rank evaluates its shard
  if (root) {
    std::cout << fmt::format("{}{}; {} epoch(s) in {:.1f} s, {:.0f} samples/s{}\n",
                             o.label.empty() ? "" : o.label + ": ", report, history.epochs.size(), wall,
                             training_seconds > 0.0 ? samples / training_seconds : 0.0,
                             setup.scope.empty() ? std::string() : " over " + setup.scope);
  }
  const std::string strategy_report = strategy->report(*model, *optimizer);  // collective for a pipeline
  if (root && !o.quiet) std::cout << strategy_report;
  if (!o.timeline.empty()) {
    if (job) {
      parallel::write_timeline(*job, o.timeline, recording);  // collective: rank 0 writes every rank's
    } else {
      timeline::write_chrome_trace(o.timeline, {{.process = 0, .label = "ddl-train", .recording = recording}});
    }
    if (root && !o.quiet) {
      std::cout << fmt::format(
          "timeline: {} ({} events on this rank; open it in ui.perfetto.dev or "
          "chrome://tracing)\n",
          o.timeline, recording.events.size());
    }
  }
  return {report, wall, monitor, history.epochs.empty() ? std::nullopt : history.epochs.back().get(monitor)};
}

// --search: the grid's configurations dealt round robin to groups of
// --group-size ranks (MPI_Comm_split), each group training its share one
// after another, data-parallel inside the group when it has several
// ranks; the ranks then add up what each group's root measured, and rank 0
// prints the table and the best. Every configuration is a whole ddl-train
// run, its command line the original one with the searched options
// replaced.
int run_search(const TrainOptions& o, const std::vector<std::string>& arguments) {
  // Every configuration's command line is checked before any trains, so a
  // bad value is a usage error on every rank alike, not a hang.
  TrainOptions checked_search = o;
  resolve_defaults(checked_search);  // what --search does not combine with
  const SearchGrid grid = parse_search(o.search);
  const std::vector<SearchPoint> points = grid.points();
  const auto parse_point = [&](const SearchPoint& point, CLI::App& app, TrainOptions& options) {
    add_options(app, options);
    std::vector<std::string> argv = search_arguments(arguments, point, o.group_size > 1);
    std::reverse(argv.begin(), argv.end());  // CLI11 takes the arguments last first
    try {
      app.parse(argv);
    } catch (const CLI::ParseError& error) {
      throw UsageError(fmt::format("--search, configuration {}: {}", point.describe(), error.what()));
    }
    options.label = point.describe();
  };
  for (const SearchPoint& point : points) {
    CLI::App app;
    TrainOptions checked;
    parse_point(point, app, checked);
    try {
      resolve_defaults(checked);
    } catch (const UsageError& error) {
      throw UsageError(fmt::format("--search, configuration {}: {}", point.describe(), error.what()));
    }
  }
  int rank = 0, ranks = 1;
  Ranks group;
  Ranks world;
  if (parallel::Communicator::launched_by_mpi()) world = parallel::Communicator::world();
  if (world) {
    rank = world->rank();
    ranks = world->size();
  }
  if (ranks % o.group_size != 0) {
    throw UsageError(fmt::format("--group-size {} does not divide the {} ranks of the job", o.group_size, ranks));
  }
  const int groups = ranks / o.group_size;
  if (world && o.group_size > 1) group = world->split(rank / o.group_size, rank);
  const bool group_root = rank % o.group_size == 0;
  if (rank == 0) {
    std::cout << fmt::format("ddl-train --search: {} configurations of {} on {} group(s) of {} rank(s)\n",
                             points.size(), o.model, groups, o.group_size);
  }
  // Per configuration: the monitored metric and the seconds, filled in by
  // the root of the group that trained it and summed over the ranks.
  std::vector<double> results(2 * points.size(), 0.0);
  std::string monitor;  // rank 0's; every configuration trains the same task
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = static_cast<std::size_t>(rank / o.group_size); i < points.size(); i += groups) {
    CLI::App app{"", "ddl-train"};
    TrainOptions point;
    parse_point(points[i], app, point);
    const RunResult result = run(app, point, "", group);
    if (rank == 0 && monitor.empty()) monitor = result.monitor;
    if (group_root) {
      results[2 * i] = result.monitored.value_or(std::nan(""));
      results[2 * i + 1] = result.seconds;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (world) world->sum_doubles(results);
  if (rank == 0) std::cout << format_search_table(grid, points, results, monitor, wall);
  return 0;
}

}  // namespace
}  // namespace ddl::apps

int main(int argc, char** argv) {
  CLI::App app{"", "ddl-train"};
  ddl::apps::TrainOptions options;
  ddl::apps::add_options(app, options);
  std::string parse_problem;  // reported by run(), after the ranks agree on it
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help
    parse_problem = error.what();
  }
  try {
    if (!options.search.empty() && parse_problem.empty()) {
      return ddl::apps::run_search(options, std::vector<std::string>(argv + 1, argv + argc));
    }
    ddl::apps::run(app, options, parse_problem, ddl::parallel::job_ranks());
    return 0;
  } catch (const ddl::apps::AgreedError& error) {
    if (error.reporter) std::cerr << "ddl-train: error: " << error.what() << '\n';
    return error.exit_code;
  } catch (const ddl::apps::UsageError& error) {
    std::cerr << "ddl-train: error: " << error.what() << " (see --help)\n";
    return 2;
  } catch (const ddl::optim::StoppedByLoss& error) {
    if (error.reporter()) {
      const bool diverged = dynamic_cast<const ddl::optim::DivergedLoss*>(&error) != nullptr;
      std::cerr << "ddl-train: error: " << error.what()
                << (diverged ? " (--on-nonfinite skip; --divergence-factor 0 turns the check off)\n"
                             : " (--on-nonfinite skip)\n");
    }
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "ddl-train: error: " << error.what() << '\n';
    return 1;
  }
}
