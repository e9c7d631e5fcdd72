// ddl-train's options (see options.hpp).
#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ddl/core/config.hpp>
#include <ddl/models/data/fashion_mnist.hpp>
#include <ddl/models/zoo.hpp>
#include <ddl/optim/schedule.hpp>

namespace ddl::apps {
namespace {

const std::vector<std::string> kOptimizers{"adadelta", "sgd", "adam", "adagrad"};
const std::vector<std::string> kSchedules{"constant", "step", "cosine"};
const std::vector<std::string> kScalings{"none", "linear", "sqrt"};
// 1 TiB: far past any model's gradients, far inside the bytes' int64.
constexpr double kMaxBucketMb = 1024.0 * 1024.0;

bool is_materials(const std::string& model) { return model == "materials_mlp"; }

// --weight-gradients names PipelineOptions::defer_weight_gradients by when
// the gradients are computed.
std::string_view weight_gradients_name(bool deferred) { return deferred ? "batch" : "micro-batch"; }

}  // namespace

bool is_segmentation(const std::string& model) { return model == "context_net" || model == "pooled_context_net"; }

double default_lr(const std::string& model, const std::string& optimizer) {
  if (optimizer == "adadelta") return 1.0;  // Keras' Adadelta default, as the Keras MNIST example
  if (optimizer == "adam" && is_materials(model)) return 4.7331e-4;      // the materials study's rate
  if (optimizer == "adam") return is_segmentation(model) ? 5e-3 : 1e-3;  // 5e-3: measured, docs/MODELS.md
  return 0.01;                                                           // SGD, Adagrad
}

namespace {

// An option whose value is one of the library's `values`, given by its
// library name (name_of), so the application keeps no list of its own. The
// option keeps the name as given (shared_settings compares it).
template <class T, class Values, class NameOf>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, T& value, const Values& values, NameOf name_of,
                        const std::string& help) {
  std::vector<std::string> names;
  for (const auto& choice : values) names.emplace_back(name_of(choice));
  const auto set = [&value, values, name_of](const std::string& name) {
    for (const auto& choice : values) {
      if (name_of(choice) == name) value = choice;
    }
  };
  return app.add_option_function<std::string>(flag, set, help)
      ->check(CLI::IsMember(names))
      ->default_str(std::string(name_of(value)));
}

// CLI11's PositiveNumber, NonNegativeNumber and Range let NaN and infinity
// through (every comparison with NaN is false) and print DBL_MAX in full:
// this names the bounds in a few characters. Above 0, or from 0 when
// `zero_allowed`, and at most `max`.
CLI::Validator finite_number(bool zero_allowed, double max = std::numeric_limits<double>::max()) {
  const bool bounded = max < std::numeric_limits<double>::max();
  const std::string bounds =
      fmt::format("{} 0{}", zero_allowed ? ">=" : ">", bounded ? fmt::format(" and <= {}", max) : "");
  return CLI::Validator(
      [zero_allowed, max, bounds](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
        if (!std::isfinite(value) || (zero_allowed ? value < 0.0 : value <= 0.0) || value > max) {
          return fmt::format("{} is not a finite number {}", text, bounds);
        }
        return {};
      },
      "NUMBER " + bounds);
}

// A seed is any 64-bit unsigned integer: CLI11 reads "-1" and 2^64 into
// one as 2^64 - 1, where this refuses them.
CLI::Validator unsigned_64_bit() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc{} || end != text.data() + text.size()) {
          return fmt::format("{} is not an integer from 0 to {}", text, std::numeric_limits<std::uint64_t>::max());
        }
        return {};
      },
      "UINT64");
}

}  // namespace

void add_options(CLI::App& app, TrainOptions& o) {
  app.description(
      "Trains a bundled ddl model and reports its test accuracy (or error).\n"
      "Image models read Fashion-MNIST (or MNIST) IDX files; materials_mlp trains on synthetic\n"
      "stress-strain curves. Threads: --threads or DDL_NUM_THREADS.");
  app.get_formatter()->column_width(34);

  app.add_option("--model", o.model, "Model to train")
      ->check(CLI::IsMember(models::model_names()))
      ->capture_default_str();
  app.add_option("--data", o.data_dir, "Directory of the MNIST-layout IDX files (.gz or raw)")
      ->default_str(models::kFashionMnistDir);
  app.add_option("--epochs", o.epochs, "Total epochs to train (a resumed run counts the ones done)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "Samples per batch")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
      ->default_str("128; 75 for materials_mlp, 16 for context_net and pooled_context_net");
  app.add_option("--accumulate", o.accumulate,
                 "Batches whose gradients are summed into one optimizer step (gradient accumulation: K batches "
                 "of B step like one of K*B, holding the activations of one batch at a time)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "adadelta, sgd, adam or adagrad")
      ->check(CLI::IsMember(kOptimizers))
      ->default_str("adadelta; adam for materials_mlp, context_net and pooled_context_net");
  app.add_option("--lr", o.lr, "Learning rate")
      ->check(finite_number(false))
      ->default_str(
          "adadelta 1.0, adam 1e-3 (4.7331e-4 for materials_mlp, 5e-3 for the segmenters), sgd and adagrad 0.01");
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(finite_number(true, 0.999999))->capture_default_str();
  app.add_flag("--nesterov", o.nesterov, "SGD with Nesterov momentum (needs --momentum > 0)");
  app.add_option("--weight-decay", o.weight_decay,
                 "L2 weight decay, added to the gradient as Keras and PyTorch do (every optimizer; not "
                 "decoupled as AdamW)")
      ->check(finite_number(true))
      ->capture_default_str();
  app.add_option("--lr-schedule", o.lr_schedule, "constant, step (x0.1 every --lr-step epochs) or cosine")
      ->check(CLI::IsMember(kSchedules))
      ->capture_default_str();
  app.add_option("--lr-step", o.lr_step_epochs, "Epochs between the step schedule's drops")
      ->check(finite_number(false))
      ->capture_default_str();
  app.add_option("--warmup-epochs", o.warmup_epochs, "Linear learning-rate warm-up from 0 over this many epochs")
      ->check(finite_number(true))
      ->capture_default_str();
  app.add_option(
         "--device", o.device,
         "cpu, cpu:N, cuda or cuda:N; with --parallel data, cuda is each rank's GPU on its node (cuda:<local "
         "rank>, or the only GPU a rank sees); where each rank has a GPU of its own, --allreduce (but shm, or with "
         "--fp16-compression) reduces on the GPUs over NCCL")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the weights, the shuffle and dropout")
      ->check(unsigned_64_bit())
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads")
      ->check(finite_number(true))
      ->default_str("DDL_NUM_THREADS, else every core");
  app.add_option("--precision", o.precision,
                 "The CPU's matrix products (convolutions, Dense): float32, or bf16 (mixed precision: operands "
                 "rounded to bfloat16, sums and everything else float32; needs AVX512-BF16)")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->default_str("DDL_CPU_PRECISION, else float32");
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "Save last.ckpt every epoch and best.ckpt at the best validation score here");
  app.add_option("--checkpoint-every-steps", o.checkpoint_every_steps,
                 "Also save last.ckpt every N optimizer steps, mid-epoch too (0: only at each epoch's end); "
                 "--resume continues from there bit for bit")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40))
      ->capture_default_str();
  app.add_flag("--resume", o.resume, "Continue from <checkpoint-dir>/last.ckpt if it exists, bit for bit");
  app.add_flag("--resume-changed", o.resume_changed,
               "Let --resume go on with another --batch-size, --accumulate, --seed, training data or number of "
               "data-parallel ranks than the checkpoint's (then no longer bit for bit)");
  app.add_option("--log-csv", o.log_csv, "Append each epoch's metrics to this CSV file");
  app.add_option("--log-jsonl", o.log_jsonl, "Append each epoch's metrics to this JSON-lines file");
  app.add_option("--plot", o.plot,
                 "Draw the training curves (loss and each metric, train and test, per epoch) into this PNG, "
                 "redrawn after every epoch (needs gnuplot; a resumed run's curves start at epoch 1)");
  app.add_option("--timeline", o.timeline,
                 "Record what every rank and thread does (data, forward, backward, each bucket's allreduce, waits, "
                 "the optimizer, pipeline messages, checkpoints) and write it, all ranks on one clock, to this "
                 "Chrome trace-event JSON file (open it in ui.perfetto.dev or chrome://tracing)");
  app.add_flag("--timeline-layers", o.timeline_layers,
               "--timeline: also a span per layer in forward (a fused Conv2d and ReLU: one) and per autograd op in "
               "backward (costs more)");
  app.add_option("--search", o.search,
                 "Hyper-parameter search: train every configuration of a grid, e.g. \"lr=0.5,1;batch-size=64,128\", "
                 "the configurations dealt to groups of --group-size ranks (under mpiexec), and print a table and the "
                 "best by the monitored metric");
  app.add_option("--group-size", o.group_size, "--search: ranks per configuration, data-parallel inside each group")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--early-stopping", o.early_stopping,
                 "Stop after this many epochs without a better validation score (0: never)")
      ->check(finite_number(true))
      ->capture_default_str();
  app.add_option("--on-nonfinite", o.on_nonfinite,
                 "A step whose loss is NaN or infinite, or diverged (--divergence-factor): stop (exit 1, before its "
                 "update, so no checkpoint holds what followed) or skip its update")
      ->check(CLI::IsMember({"stop", "skip"}))
      ->capture_default_str();
  app.add_option("--divergence-factor", o.divergence_factor,
                 "A step's loss above this many times the larger of the medians of the first 8 and the last 64 "
                 "steps' losses has diverged, and is treated as --on-nonfinite says (0: no such check)")
      ->check(finite_number(true))
      ->capture_default_str();
  app.add_option("--train-limit", o.train_limit, "Use only the first N training samples (-1: all)")
      ->capture_default_str();
  app.add_option("--test-limit", o.test_limit, "Use only the first N test samples (-1: all)")->capture_default_str();
  app.add_option("--samples", o.samples,
                 "materials_mlp: synthetic training curves; context_net, pooled_context_net: synthetic training images "
                 "(test: a fifth as many)")
      ->check(CLI::Range(std::int64_t{10}, std::int64_t{100000000}))
      ->default_str("20000 curves; 2000 images");
  app.add_option(
         "--image-size", o.image_size,
         "context_net, pooled_context_net: the height and width of their synthetic images (discs, rectangles and "
         "triangles on a noisy background; fully convolutional, they take any size, even for pooled_context_net)")
      ->check(CLI::Range(std::int64_t{8}, std::int64_t{4096}))
      ->capture_default_str();
  app.add_option("--noise", o.noise, "materials_mlp: Gaussian stress noise in MPa")
      ->check(finite_number(true))
      ->capture_default_str();
  app.add_flag("!--no-validation", o.validate, "Skip evaluating the test set after every epoch");
  app.add_option("--prefetch", o.prefetch, "Batches prepared ahead by the loader's thread (0: none)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_flag("-q,--quiet", o.quiet, "Print only the final result line");
  add_choice(app, "--parallel", o.parallel, parallel::all_strategy_kinds(), parallel::strategy_kind_name,
             "none; data: data parallelism over the MPI ranks (mpiexec -n N ddl-train --parallel data); "
             "ps: a parameter server on the last --servers ranks; pipeline: the model's layers cut into one "
             "stage per rank, each batch into --micro-batches; hybrid: --dp pipelines of --pp stages, each "
             "stage's gradients averaged over the pipelines by --allreduce, each stage's layers split over --tp "
             "ranks if given (a 3-D grid of --dp x --pp x --tp ranks); tensor: Dense and Conv2d layers split "
             "in pairs over tensor groups of --tp ranks (Megatron's column and row layers), the groups replicas "
             "averaging their gradients by --allreduce. --batch-size is the global batch, split over the ranks "
             "that read data (a pipeline's stages all read every batch of its share, a tensor group's ranks "
             "every batch of theirs)");
  add_choice(app, "--allreduce", o.allreduce, parallel::allreduce_choices(), parallel::algorithm_name,
             "Gradient allreduce: ring, rhd, tree, naive, shm (shared-memory window, one node), hierarchical "
             "(reduce in each node, allreduce among one leader per node, broadcast in the node), builtin "
             "(MPI_Allreduce; with --device cuda and a GPU per rank, ncclAllReduce), or auto (--parallel data: "
             "the one the cost model predicts fastest on the links measured at start-up, shown in the header)");
  app.add_option("--bucket-mb", o.bucket_mb, "Gradient bucket size in MiB (tensor fusion)")
      ->check(finite_number(false, kMaxBucketMb))
      ->default_str("DDL_FUSION_THRESHOLD, else 25");
  add_choice(app, "--overlap", o.overlap, parallel::all_overlaps(), parallel::overlap_name,
             "Reduce gradient buckets during backward (on), after it (off), or on where a core is free or the "
             "buckets are on a GPU (auto); with one bucket, always after");
  app.add_flag_callback(
      "--no-overlap", [&o] { o.overlap = parallel::Overlap::off; }, "--overlap off");
  add_choice(app, "--shard", o.shard, parallel::all_shardings(), parallel::sharding_name,
             "--parallel data or hybrid: what each data-parallel rank keeps only 1/N of: none; optimizer (its "
             "state: ZeRO stage 1); gradients (and the reduced gradients: ZeRO stage 2); parameters (and the "
             "parameters, gathered for each layer's forward and backward: ZeRO stage 3, FSDP; --parallel data "
             "only). The weights are the same bits as unsharded, with --allreduce ring, rhd or builtin");
  app.add_flag("--fp16-compression", o.fp16_compression,
               "Send gradients as float16 (half the bytes; --allreduce ring only)");
  app.add_option("--servers", o.servers, "--parallel ps: server ranks (the last ones)")
      ->check(finite_number(false))
      ->capture_default_str();
  app.add_flag("--async", o.asynchronous, "--parallel ps: apply each worker's gradients as they arrive");
  app.add_option("--max-staleness", o.max_staleness, "--parallel ps --async: pushes a worker may run ahead")
      ->check(finite_number(true))
      ->capture_default_str();
  app.add_option("--batch-per-rank", o.batch_per_rank,
                 "Samples per rank per step instead of --batch-size (the global batch grows with the ranks)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  app.add_option("--stages", o.stages, "--parallel pipeline: stages, one per rank")
      ->check(finite_number(false))
      ->default_str("the rank count");
  app.add_option("--dp", o.dp, "--parallel hybrid: pipelines, each training on its share of every batch")
      ->check(finite_number(false));
  app.add_option("--pp", o.pp, "--parallel hybrid: stages per pipeline (--dp x --pp x --tp must be the rank count)")
      ->check(finite_number(false));
  app.add_option("--tp", o.tp,
                 "--parallel tensor: ranks per tensor group, each holding its slice of every split layer (the "
                 "rank count must be a multiple; the groups are replicas); --parallel hybrid: each stage's layers "
                 "split over tensor groups of this many ranks, stages cut only where the activation is whole")
      ->check(finite_number(false))
      ->default_str("tensor: the rank count; hybrid: 1");
  app.add_option("--micro-batches", o.micro_batches,
                 "--parallel pipeline: micro-batches per batch (sizes differ by at most one; a batch smaller than "
                 "this gets one per sample). More shrink the bubble (p-1)/(M+p-1) but make each product smaller")
      ->check(CLI::Range(1, 4096))
      ->default_str(fmt::format("{} per stage", parallel::kMicroBatchesPerStage));
  add_choice(app, "--schedule", o.schedule, parallel::all_pipeline_schedules(), parallel::pipeline_schedule_name,
             "--parallel pipeline: 1f1b (one forward, one backward: stage s holds at most p-s micro-batches of "
             "activations), gpipe (all forwards, then all backwards: every stage holds all M), zb-h1 (1f1b "
             "with each micro-batch's weight gradients a step of their own, held back to fill the pipeline's "
             "drain: a third of 1f1b's bubble at its activations, plus at most s micro-batches' weight-gradient "
             "rows on stage s), zb-h2 (twice zb-h1's warm-up and held weight gradients, so that consecutive "
             "steps interlock: no bubble for M >= 2p-1, at up to 2(p-s)-1 micro-batches' activations on stage "
             "s), interleaved-1f1b (Megatron's: --chunks v chunks of the model per rank, r, r+p, ...: a bubble "
             "of (p-1)/(vM+p-1) for M a multiple of p; messages over MPI) or zb-v (2 chunks per rank in a V, "
             "rank r holding stages r and 2p-1-r, weight gradients as their own steps: 6M+p-1 chunk units a "
             "step at 1f1b's peak activations). zb-h1, zb-h2 and zb-v place the weight gradients themselves, "
             "whatever --weight-gradients says");
  app.add_option("--chunks", o.chunks,
                 "--parallel pipeline --schedule interleaved-1f1b: chunks of the model per rank (the model is cut "
                 "into ranks x chunks stages; --split then gives ranks x chunks - 1 points)")
      ->check(CLI::Range(2, 64))
      ->default_str("2");
  add_choice(app, "--weight-gradients", o.defer_weight_gradients, std::vector<bool>{true, false}, weight_gradients_name,
             "--parallel pipeline: when a stage computes its Dense weights' gradients: once per batch, from "
             "the inputs and output gradients every micro-batch keeps until the last backward (batch: one "
             "large product instead of M small ones, the B/W split of zero-bubble schedules; costs those "
             "rows' memory), or one product per micro-batch right after its backward (micro-batch)");
  add_choice(app, "--pack-weights", o.pack_weights, parallel::all_pack_weights(), parallel::pack_weights_name,
             "--parallel pipeline: pack each weight once per batch into the layout the CPU's matrix kernel "
             "reads, for the forward and input-gradient products of every micro-batch (oneDNN's blocked "
             "layout on AVX-512 machines, nothing on AVX2 ones; costs a copy of the stage's weights per "
             "orientation during the step): auto packs from " +
                 std::to_string(parallel::kPackFromMicroBatches) +
                 " micro-batches a batch on (with fewer, packing costs more than it saves), on with any "
                 "M > 1, off lets each product pack it anew");
  app.add_option("--recompute", o.recompute,
                 "Activation recomputation: keep only the input of each listed range of layers (e.g. 2-5,8-10, "
                 "inclusive, by index or name; all: the whole model) between forward and backward, and run its "
                 "forward again in backward (the same training, bit for bit, for one more forward). With "
                 "--parallel pipeline or hybrid only all: each stage is one range")
      ->type_name("RANGES");
  add_choice(app, "--balance", o.balance, parallel::all_stage_balances(), parallel::stage_balance_name,
             "--parallel pipeline: split the layers into stages by measured time (rank 0 times each layer's "
             "forward, input gradient and weight gradient at the micro-batch size; the cut whose simulated step "
             "under --schedule, messages included, is shortest), of equal parameter bytes, or of equal layer "
             "counts");
  app.add_option("--split", o.split,
                 "--parallel pipeline: the stages' first layers instead of --balance, e.g. 4,7 for 3 stages of "
                 "layers 0-3, 4-6 and 7-")
      ->type_name("LAYERS");
  app.add_option("--placement", o.placement,
                 "Run each layer on a device of its own, e.g. 0-6=cpu:0,7-10=cpu:1 (layer indexes as the summary "
                 "numbers them, ranges inclusive; cpu:N or cuda:N; logical CPU devices come from DDL_CPU_DEVICES). "
                 "Data, loss and targets stay on --device; the end of the run reports each device's memory")
      ->type_name("PLAN");
  app.add_option("--scale-lr", o.scale_lr,
                 "Scale --lr by the global batch over --lr-batch (the rank count, when each rank keeps that batch "
                 "with --batch-per-rank): linear (Goyal et al. 2017; pair it with --warmup-epochs 5) or sqrt "
                 "(Krizhevsky 2014; gentler, often better for adaptive optimizers)")
      ->check(CLI::IsMember(kScalings))
      ->capture_default_str();
  app.add_option("--lr-batch", o.lr_batch, "The batch size --lr was tuned for, which --scale-lr scales from")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
      ->default_str("the model's default --batch-size");
}

void resolve_defaults(TrainOptions& o) {
  const bool materials = is_materials(o.model);
  if (o.data_dir.empty()) o.data_dir = models::kFashionMnistDir;
  if (o.batch_per_rank > 0 && o.batch_size > 0) throw UsageError("give --batch-size or --batch-per-rank, not both");
  const std::int64_t default_batch = materials ? 75 : is_segmentation(o.model) ? 16 : 128;
  if (o.batch_size == 0 && o.batch_per_rank == 0) o.batch_size = default_batch;
  if (o.lr_batch == 0) o.lr_batch = default_batch;
  if (o.optimizer.empty()) o.optimizer = materials || is_segmentation(o.model) ? "adam" : "adadelta";
  if (o.samples == 0) o.samples = is_segmentation(o.model) ? 2000 : 20000;
  if (o.model == "pooled_context_net" && o.image_size % 2 != 0) {
    throw UsageError(
        fmt::format("--image-size {}: pooled_context_net pools by 2 and upsamples by 2, so its output "
                    "has the image's size only for an even size (try {})",
                    o.image_size, o.image_size + 1));
  }
  if (!o.lr) o.lr = default_lr(o.model, o.optimizer);
  if (o.divergence_factor > 0.0 && o.divergence_factor <= 1.0) {
    throw UsageError(fmt::format("--divergence-factor {} would stop healthy steps: give 0 (off) or a factor above 1",
                                 o.divergence_factor));
  }
  if (o.nesterov && (o.optimizer != "sgd" || o.momentum <= 0.0)) {
    throw UsageError("--nesterov needs --optimizer sgd and --momentum > 0");
  }
  if (o.momentum > 0.0 && o.optimizer != "sgd") throw UsageError("--momentum applies to --optimizer sgd only");
  using parallel::StrategyKind;
  if (o.fp16_compression &&
      (o.parallel != StrategyKind::data ||
       (o.allreduce != parallel::AllreduceAlgorithm::ring && o.allreduce != parallel::AllreduceAlgorithm::automatic))) {
    throw UsageError("--fp16-compression needs --parallel data --allreduce ring (or auto, which then takes the ring)");
  }
  if (o.shard != parallel::Sharding::none) {
    if (o.fp16_compression) {
      throw UsageError(
          "--fp16-compression does not combine with --shard: sharding gathers the parameters themselves, "
          "which float16 would round");
    }
    const auto a = o.allreduce;
    if (a != parallel::AllreduceAlgorithm::automatic && !parallel::has_halves(a)) {
      throw UsageError(
          fmt::format("--shard {} needs a reduce-scatter and an allgather: --allreduce ring, rhd, "
                      "builtin or auto, not {}",
                      parallel::sharding_name(o.shard), parallel::algorithm_name(a)));
    }
  }
  if (o.threads > config::available_cpus()) {
    throw UsageError(
        fmt::format("--threads {}: this process may run on {} CPU(s), and more threads than CPUs only "
                    "slow every kernel down",
                    o.threads, config::available_cpus()));
  }
  if (o.precision == "bf16") {
    if (!config::cpu_has_bf16()) {
      throw UsageError(
          "--precision bf16: this CPU lacks the AVX512-BF16 instructions bf16 needs (AMD Zen 4, Intel "
          "Cooper Lake or Sapphire Rapids and later); use float32");
    }
    if (o.device.starts_with("cuda")) {
      throw UsageError("--precision bf16 applies to the CPU's matrix products, not to --device cuda");
    }
  }
  if (o.resume && o.checkpoint_dir.empty()) throw UsageError("--resume needs --checkpoint-dir");
  if (o.resume_changed && !o.resume) throw UsageError("--resume-changed applies to --resume");
  if (o.checkpoint_every_steps > 0 && o.checkpoint_dir.empty()) {
    throw UsageError("--checkpoint-every-steps needs --checkpoint-dir");
  }
  if (!parallel::is_pipelined(o.parallel)) {
    for (const auto& [set, name] :
         {std::pair{o.stages > 0, "--stages"}, std::pair{o.micro_batches > 0, "--micro-batches"},
          std::pair{!o.split.empty(), "--split"}, std::pair{!o.defer_weight_gradients, "--weight-gradients"},
          std::pair{o.pack_weights != parallel::PackWeights::Auto, "--pack-weights"},
          std::pair{o.chunks > 0, "--chunks"}}) {
      if (set) throw UsageError(std::string(name) + " applies to --parallel pipeline or hybrid");
    }
  }
  if (parallel::is_pipelined(o.parallel) && !o.recompute.empty() && o.recompute != "all") {
    throw UsageError("--recompute " + o.recompute + ": a pipeline recomputes whole stages; give --recompute all");
  }
  if (!o.recompute.empty() && o.shard == parallel::Sharding::parameters) {
    throw UsageError(
        "--recompute does not combine with --shard parameters (the rerun forward would need the "
        "parameters gathered again inside backward)");
  }
  if (o.parallel == StrategyKind::hybrid) {
    if (o.dp == 0 || o.pp == 0) throw UsageError("--parallel hybrid needs --dp and --pp");
    if (o.stages > 0) throw UsageError("--parallel hybrid takes its stage count from --pp, not --stages");
  } else if (o.dp > 0 || o.pp > 0) {
    throw UsageError("--dp and --pp apply to --parallel hybrid");
  }
  if (o.tp > 0 && o.parallel != StrategyKind::tensor && o.parallel != StrategyKind::hybrid) {
    throw UsageError("--tp applies to --parallel tensor or hybrid");
  }
  if (!o.placement.empty() && o.parallel != StrategyKind::none) {
    throw UsageError(fmt::format("--placement places layers inside one process; it does not combine with --parallel {}",
                                 parallel::strategy_kind_name(o.parallel)));
  }
  if (o.timeline_layers && o.timeline.empty()) throw UsageError("--timeline-layers needs --timeline");
  if (o.group_size > 1 && o.search.empty()) throw UsageError("--group-size applies to --search");
  if (!o.search.empty()) {
    for (const auto& [set, name] :
         {std::pair{o.parallel != StrategyKind::none, "--parallel (a group's ranks train data-parallel)"},
          std::pair{!o.checkpoint_dir.empty(), "--checkpoint-dir"},
          std::pair{!o.log_csv.empty() || !o.log_jsonl.empty(), "--log-csv and --log-jsonl"},
          std::pair{!o.timeline.empty(), "--timeline"}, std::pair{!o.plot.empty(), "--plot"}}) {
      if (set) throw UsageError(std::string("--search trains many configurations and does not combine with ") + name);
    }
  }
  if (o.early_stopping > 0 && !o.validate) throw UsageError("--early-stopping needs validation (drop --no-validation)");
  if (o.train_limit == 0 || o.train_limit < -1) {
    throw UsageError(fmt::format("--train-limit must be -1 or positive, got {}", o.train_limit));
  }
  if (o.test_limit == 0 || o.test_limit < -1) {
    throw UsageError(fmt::format("--test-limit must be -1 or positive, got {}", o.test_limit));
  }
}

parallel::ParallelConfig parallel_config(const TrainOptions& o) {
  parallel::ParallelConfig config;
  config.kind = o.parallel;
  // At least a byte: 0 would mean the default.
  const std::int64_t bucket_bytes =
      o.bucket_mb ? std::max<std::int64_t>(1, std::llround(*o.bucket_mb * 1024.0 * 1024.0)) : 0;
  config.data = {.algorithm = o.allreduce,
                 .bucket_bytes = bucket_bytes,
                 .overlap = o.overlap,
                 .fp16_compression = o.fp16_compression,
                 .sharding = o.shard};
  config.parameter_server = {.servers = o.servers, .asynchronous = o.asynchronous, .max_staleness = o.max_staleness};
  config.pipeline = {.micro_batches = o.micro_batches,
                     .schedule = o.schedule,
                     .chunks = o.chunks,
                     .allreduce = o.allreduce,
                     .bucket_bytes = bucket_bytes,
                     .overlap = o.overlap,
                     .sharding = o.shard,
                     .defer_weight_gradients = o.defer_weight_gradients,
                     .pack_weights = o.pack_weights,
                     .recompute = o.recompute == "all"};
  const bool hybrid = o.parallel == parallel::StrategyKind::hybrid;
  config.layout = {
      .stages = hybrid ? o.pp : o.stages, .pipelines = hybrid ? o.dp : 1, .split = o.split, .balance = o.balance};
  config.tensor_ranks = o.tp;
  config.placement = o.placement;
  return config;
}

std::int64_t global_batch(const TrainOptions& o, int data_ranks) {
  const std::int64_t batch = o.batch_per_rank > 0 ? o.batch_per_rank * data_ranks : o.batch_size;
  if (batch % data_ranks != 0) {
    throw UsageError(
        fmt::format("--batch-size {} is the global batch and must divide evenly over {} ranks", batch, data_ranks));
  }
  return batch;
}

double effective_lr(const TrainOptions& o, std::int64_t global_batch) {
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(o.lr_batch);
  if (o.scale_lr == "linear") return optim::scale_lr_linear(*o.lr, ratio);
  if (o.scale_lr == "sqrt") return optim::scale_lr_sqrt(*o.lr, ratio);
  return *o.lr;
}

std::vector<std::string> shared_settings(const CLI::App& app) {
  std::vector<std::string> settings;
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = option->get_name();
    if (std::find(kPerRankOptions.begin(), kPerRankOptions.end(), name) != kPerRankOptions.end()) continue;
    const std::string value =
        option->count() > 0 ? fmt::format("{}", fmt::join(option->results(), " ")) : option->get_default_str();
    settings.push_back(name + " " + value);
  }
  return settings;
}

}  // namespace ddl::apps
