// ddl-train's command line: every option with its default, parsed by CLI11,
// plus the defaults that depend on the model or the optimizer (resolved
// after parsing, so --help can state them).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ddl/parallel/setup.hpp>

// Declared, not included: CLI11 is header-only and compiles into every file
// that includes it (about 9 s a file at -O3), so only the files that build or
// read the command line include it.
namespace CLI {
class App;
}

namespace ddl::apps {

// A command line that parses but makes no sense (an unknown device, a
// missing data directory): reported in one line with exit code 2, like
// CLI11's own parse errors.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An error every rank of an MPI job raised together, after agreeing on it
// (start_up.hpp): rank 0 alone prints it, and every rank exits with its code.
struct AgreedError : std::runtime_error {
  AgreedError(const std::string& message, int code, bool printed_here)
      : std::runtime_error(message), exit_code(code), reporter(printed_here) {}
  int exit_code;
  bool reporter;
};

// The options whose values may differ between the ranks of one job: where
// each finds its data and writes its files, and how it uses its own node.
inline const std::vector<std::string> kPerRankOptions{"--data",      "--threads",        "--device",
                                                      "--prefetch",  "--quiet",          "--log-csv",
                                                      "--log-jsonl", "--checkpoint-dir", "--plot"};

struct TrainOptions {
  std::string model = "mnist_cnn";
  std::string data_dir;  // default: Debian's Fashion-MNIST directory
  std::int64_t epochs = 12;
  std::int64_t batch_size = 0;  // 0: the model's default
  std::int64_t accumulate = 1;  // batches per optimizer step (gradient accumulation)
  std::string optimizer;        // empty: the model's default
  std::optional<double> lr;     // unset: the optimizer's default
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::string lr_schedule = "constant";
  std::int64_t lr_step_epochs = 10;
  double warmup_epochs = 0.0;
  std::string device = "cpu";
  std::uint64_t seed = 1;
  int threads = 0;        // 0: DDL_NUM_THREADS or every core
  std::string precision;  // float32 | bf16; empty: DDL_CPU_PRECISION, else float32
  std::string checkpoint_dir;
  bool resume = false;
  std::int64_t checkpoint_every_steps = 0;  // also last.ckpt every N steps (0: at epochs' ends only)
  bool resume_changed = false;              // --resume under another batch size, seed or data
  std::string log_csv;
  std::string log_jsonl;
  std::string plot;                   // PNG of the training curves, redrawn after every epoch (rank 0)
  std::string timeline;               // Chrome trace-event file of the run (rank 0 writes every rank's)
  bool timeline_layers = false;       // with it, a span per layer forward and per autograd node backward
  std::int64_t early_stopping = 0;    // patience in epochs; 0: off
  std::string on_nonfinite = "stop";  // stop | skip: a step whose loss is NaN or infinite, or diverged
  double divergence_factor = 1000.0;  // optim::TrainerOptions::divergence_factor; 0: off
  std::int64_t train_limit = -1;
  std::int64_t test_limit = -1;
  std::int64_t samples = 0;      // synthetic training samples; 0: the model's default
  std::int64_t image_size = 64;  // context_net: the side of its square training images
  double noise = 2.0;            // materials_mlp: stress noise in MPa
  bool validate = true;
  int prefetch = 2;
  bool quiet = false;
  parallel::StrategyKind parallel = parallel::StrategyKind::none;
  int servers = 1;            // ps: server ranks
  bool asynchronous = false;  // ps: asynchronous updates
  int max_staleness = 4;      // ps --async
  parallel::AllreduceAlgorithm allreduce = parallel::AllreduceAlgorithm::ring;
  std::optional<double> bucket_mb;  // unset: DDL_FUSION_THRESHOLD's default, in the library
  parallel::Overlap overlap = parallel::Overlap::automatic;
  bool fp16_compression = false;
  parallel::Sharding shard = parallel::Sharding::none;  // data: ZeRO stage 1, 2 or 3; hybrid: 1 or 2
  std::int64_t batch_per_rank = 0;  // instead of --batch-size: Horovod's convention
  std::string scale_lr = "none";    // none | linear | sqrt, by the global batch over lr_batch
  std::int64_t lr_batch = 0;        // the batch --lr was tuned for (0: the model's default batch)
  std::string placement;            // "0-6=cpu:0,7-10=cpu:1": a device per layer (empty: all on --device)
  int stages = 0;                   // pipeline: 0 is one per rank
  int dp = 0;                       // hybrid: pipelines
  int pp = 0;                       // hybrid: stages per pipeline
  int tp = 0;                       // tensor: ranks per tensor group (0: every rank)
  int micro_batches = 0;            // pipeline: 0 is parallel::kMicroBatchesPerStage per stage
  parallel::PipelineSchedule schedule = parallel::PipelineSchedule::OneFOneB;
  int chunks = 0;                      // pipeline: model chunks per rank (0: the schedule's own)
  bool defer_weight_gradients = true;  // pipeline --weight-gradients: batch (true) | micro-batch
  // pipeline --pack-weights: auto | on | off
  parallel::PackWeights pack_weights = parallel::PackWeights::Auto;
  std::string recompute;               // --recompute: "all" or layer ranges "2-5,8-10"; empty: none
  parallel::StageBalance balance = parallel::StageBalance::Time;
  std::string split;   // pipeline: "4,7", the first layer of every stage after the first
  std::string search;  // "lr=0.5,1;batch-size=64,128": train every configuration of the grid
  int group_size = 1;  // --search: ranks per configuration (data-parallel inside a group)
  std::string label;   // not an option: --search's name of the configuration, before the final line
};

// Declares every option on `app`, writing into `options`.
void add_options(CLI::App& app, TrainOptions& options);

// "--name value" for every option of `app` but kPerRankOptions, after
// parsing: the value given, or the default (what the ranks must agree on).
std::vector<std::string> shared_settings(const CLI::App& app);

// Fills the model- and optimizer-dependent defaults and checks combinations
// CLI11 cannot (throws UsageError naming the option).
void resolve_defaults(TrainOptions& options);

// What runs, computed from what was asked (never written back into the
// options): the parallel configuration; the global batch (--batch-size, or
// --batch-per-rank times the ranks that share each batch: a UsageError
// unless it divides evenly over them); the learning rate after --scale-lr.
parallel::ParallelConfig parallel_config(const TrainOptions& options);
std::int64_t global_batch(const TrainOptions& options, int data_ranks);
double effective_lr(const TrainOptions& options, std::int64_t global_batch);

// context_net and pooled_context_net: trained on synthetic shapes, per pixel.
bool is_segmentation(const std::string& model);

// The learning rate an optimizer gets when --lr is not given.
double default_lr(const std::string& model, const std::string& optimizer);

}  // namespace ddl::apps
