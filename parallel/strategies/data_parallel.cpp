// The data-parallel strategy (see data_parallel.hpp). The training thread
// fills buckets from gradient hooks; the communication thread reduces them
// strictly in bucket order, the same on every rank, so the ranks' collectives
// always match up.
#include <ddl/parallel/strategies/data_parallel.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>

#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/cuda/compute_mark.hpp>
#include <ddl/core/cuda/staging.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/optim/optimizer.hpp>
#include <ddl/parallel/choice_by_name.hpp>
#include <ddl/parallel/collectives/transport.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>
#include <ddl/parallel/config.hpp>
#include <ddl/parallel/strategies/gathered_forward.hpp>
#include <ddl/parallel/strategies/gradient_buckets.hpp>
#include <ddl/parallel/strategies/initial_state.hpp>

namespace ddl::parallel {

using Clock = std::chrono::steady_clock;

namespace {

bool on_one_gpu(const std::vector<std::pair<std::string, Tensor>>& parameters) {
  const Device first = parameters.front().second.device();
  return first.is_cuda() && std::all_of(parameters.begin(), parameters.end(),
                                        [&](const auto& named) { return named.second.device() == first; });
}

// Collective: whether this rank's buckets, on `gpu` (none: in host memory),
// are reduced there, over NCCL, rather than through host memory over MPI.
// NCCL needs a GPU of its own per rank (told apart by UUID, whatever index
// each process gives it); float16 on the wire exists on the host only, and
// so do the algorithms without runs_on_gpu. Every rank joins the gather, so
// the answer is the same on all of them once they agree on the options (the
// layout says them).
bool reduce_on_gpu(const Communicator& comm, const DataParallelOptions& options, std::optional<Device> gpu) {
  const bool own_gpus = every_rank_has_its_gpu(comm, gpu ? std::optional<int>(gpu->index()) : std::nullopt);
  return gpu && own_gpus && NcclCommunicator::built() && runs_on_gpu(options.algorithm) && !options.fp16_compression;
}

// Whether the buckets are reduced during backward, and why, in the words
// of the report ("on", "off (one bucket)", "off (automatic: ...)"). A core
// is free where the node's ranks x their compute threads leave one of the
// CPUs this process may run on.
struct OverlapDecision {
  bool on = false;
  std::string reason;
};

OverlapDecision decide_overlap(Overlap overlap, std::size_t buckets, bool gpu_buckets, int local_ranks) {
  if (buckets <= 1) return {false, overlap == Overlap::off ? "off" : "off (one bucket)"};
  if (overlap != Overlap::automatic) return {overlap == Overlap::on, std::string(overlap_name(overlap))};
  if (gpu_buckets) return {true, "on (automatic: backward runs on the GPU)"};
  const int cpus = ddl::config::available_cpus(), threads = ddl::config::num_threads();
  const bool free = local_ranks * threads < cpus;
  return {free, fmt::format("{} (automatic: {} rank{} x {} thread{} on {} core{} leave {} core free)",
                            free ? "on" : "off", local_ranks, local_ranks == 1 ? "" : "s", threads,
                            threads == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s", free ? "a" : "no")};
}

}  // namespace

std::string_view overlap_name(Overlap overlap) {
  switch (overlap) {
    case Overlap::automatic:
      return "auto";
    case Overlap::on:
      return "on";
    case Overlap::off:
      return "off";
  }
  return "unknown";
}

const std::vector<Overlap>& all_overlaps() {
  static const std::vector<Overlap> overlaps{Overlap::automatic, Overlap::on, Overlap::off};
  return overlaps;
}

Overlap parse_overlap(std::string_view name) {
  return choice_by_name(std::string(name), all_overlaps(), overlap_name, "overlap");
}

struct DataParallel::State {
  Communicator comm;
  DataParallelOptions options;
  StallInspector stall_inspector;
  std::vector<GradientBucket> buckets;
  std::optional<NcclCommunicator> nccl;  // set when the buckets are reduced on this rank's GPU
  // For buckets on the GPU, each one's point on the compute stream where
  // its gradients are written: what its transfer waits for, rather than
  // every kernel queued by the time the communication thread reaches it
  // (the training thread is usually far ahead of the GPU).
  std::vector<cuda_backend::ComputeMark> written;
  // When GPU buckets are reduced over MPI, the host copy of each: one copy
  // of the whole bucket each way instead of one per parameter, in pinned
  // memory on the GPU's copy stream (core/cuda/staging.hpp).
  std::vector<cuda_backend::StagingBuffer> staging;
  std::shared_ptr<ShardedState> sharded;             // set when options.sharding is not none
  std::shared_ptr<optim::StepMemoryMonitor> memory;  // callbacks(), for report()
  bool prepared = false;
  bool overlapping = false;  // see decide_overlap
  std::string overlap_reason;

  // Shared with the communication thread, under `mutex`.
  std::mutex mutex;
  std::condition_variable changed;
  bool armed = false;                     // the step's last backward is running
  std::vector<std::int64_t> ready;        // per bucket: entries copied in this step
  std::vector<std::int64_t> accumulated;  // per bucket: stage 3's gradients in an earlier backward of the step
  std::vector<bool> launched;             // per bucket: handed to the communication thread
  std::size_t reduced = 0;                // buckets reduced in this step, in order
  std::exception_ptr failure;
  std::jthread worker;

  SyncStatistics statistics;  // statistics.steps: the steps taken so far
  Clock::time_point step_start;
  std::int64_t sent_mark = 0;  // bytes_sent() when the step's traffic was last counted

  // What this rank has sent on the communicators of the steps.
  std::int64_t bytes_sent() const {
    return comm.bytes_sent() + (sharded ? sharded->gather_communicator().bytes_sent() : 0);
  }
  // Into the statistics, at the end of synchronize_gradients (a skipped
  // step ends there) and of update (stages 1 and 2 gather there).
  void count_traffic() {
    const std::int64_t now = bytes_sent();
    statistics.bytes_sent += now - sent_mark;
    sent_mark = now;
  }

  State(Communicator communicator, DataParallelOptions opts)
      : comm(std::move(communicator)), options(opts), stall_inspector(comm) {}

  // Puts the entry's gradient into its bucket, unless backward already
  // accumulated it there (its grad is the entry's view).
  void copy_in(std::size_t b, const BucketEntry& entry) {
    const Tensor grad = entry.parameter.grad();
    if (entry.in_buffer(grad)) return;
    float* target = buckets[b].data() + entry.offset;
    if (grad.defined()) {
      backend::copy_bytes(buckets[b].buffer.device(), target, grad.device(), grad.raw_data(), grad.nbytes());
    } else {
      backend::fill_zero(buckets[b].buffer.device(), target, entry.parameter.nbytes());
    }
  }

  void reduce(std::size_t b) {
    // Tagged with the step and bucket, so a trace viewer (and the test of
    // the timeline) can line up one collective's spans across the ranks.
    timeline::Span span("communication", sharded ? "reduce-scatter" : "allreduce");
    if (span.active()) {  // the algorithm's name is a string made only for a recording
      span.arg("step", statistics.steps).arg("bucket", static_cast<std::int64_t>(b));
      span.arg("bytes", static_cast<std::int64_t>(buckets[b].buffer.nbytes()));
      span.arg("algorithm", algorithm_name(options.algorithm)).arg("memory", nccl ? "gpu" : "host");
    }
    const Tensor& buffer = buckets[b].buffer;
    // Sharded, a reduce-scatter: rank r's chunk ends averaged, the rest
    // holds values nobody reads.
    if (nccl && sharded) {
      detail::reduce_scatter_after(*nccl, buffer, options.algorithm, ReduceOp::average, &written[b]);
    } else if (nccl) {
      detail::allreduce_after(*nccl, buffer, options.algorithm, ReduceOp::average, &written[b]);
    } else {
      const bool staged = !staging.empty();
      if (staged) staging[b].download(buffer.raw_data(), written[b]);
      const std::span<float> host(staged ? static_cast<float*>(staging[b].host()) : buffer.data<float>(),
                                  static_cast<std::size_t>(buffer.numel()));
      if (sharded) {
        reduce_scatter(comm, host, options.algorithm, ReduceOp::average);
      } else {
        allreduce(comm, host, options.algorithm, options.fp16_compression ? WireFormat::float16 : WireFormat::float32,
                  ReduceOp::average);
      }
      if (staged) staging[b].upload(buffer.raw_data());
    }
    if (span.active()) span.rate(static_cast<std::int64_t>(buffer.nbytes()));
    if (sharded) sharded->reduced(b);
  }

  // Sharded: the optimizer cut down to this rank's chunks, at the first
  // prepare() that has one (none for evaluation).
  void slice(optim::Optimizer* optimizer) {
    if (sharded && optimizer != nullptr && !sharded->sliced()) sharded->slice(*optimizer);
  }

  // Bucket b's gradients are all queued: what its transfer waits for. On
  // the training thread, which queued them, before the bucket is handed on.
  void mark_ready(std::size_t b) {
    if (!written.empty()) written[b].record();
  }

  // The next bucket in order has been handed on and not yet reduced.
  // Under `mutex`.
  bool next_bucket_launched() const { return reduced < launched.size() && launched[reduced]; }

  // Whether full buckets are reduced during backward: on the communication
  // thread when overlapping; on the training thread, as each fills, under
  // sharding stages 2 and 3, whose point is that a bucket's gradients (and
  // its gathered parameters) are freed as soon as they are reduced.
  bool reduce_during_backward() const { return overlapping || (sharded && sharded->shards_gradients()); }

  // Bucket b's gradients are all in it: hands it to the communication
  // thread, or reduces it here, after the buckets before it, so every rank
  // reduces them in the same order.
  void hand_on(std::size_t b) {
    mark_ready(b);
    // Sharded, the bucket's gradients stop being the parameters' (only
    // this rank's chunk will be an average): dropped here, on the training
    // thread that runs backward, not on the one that reduces.
    if (sharded) {
      for (const BucketEntry& entry : buckets[b].entries) entry.parameter.zero_grad();
    }
    {
      const std::lock_guard lock(mutex);
      launched[b] = true;
    }
    if (overlapping) return changed.notify_all();
    for (;;) {
      std::size_t next = 0;
      {
        const std::lock_guard lock(mutex);
        if (!next_bucket_launched()) return;
        next = reduced;
      }
      // Counted as reduced even when it throws, so that the next step's
      // begin_step, which waits for the buckets in hand, does not wait forever.
      struct Count {
        State& state;
        ~Count() {
          const std::lock_guard lock(state.mutex);
          ++state.reduced;
        }
      } count{*this};
      reduce(next);
    }
  }

  // The communication thread: reduces bucket 0, 1, ... of each step as each
  // is launched.
  void serve(const std::stop_token& stop) {
    timeline::name_this_thread("communication");
    for (;;) {
      std::size_t next = 0;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return stop.stop_requested() || next_bucket_launched(); });
        if (stop.stop_requested()) return;
        next = reduced;
      }
      try {
        reduce(next);
      } catch (...) {
        // The first failure is the cause; later buckets of the step fail
        // because of it (an aborted NCCL communicator says only that).
        const std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
      {
        const std::lock_guard lock(mutex);
        ++reduced;
      }
      changed.notify_all();
    }
  }

  // Called by the gradient hook of the parameter at buckets[b].entries[e].
  void on_gradient(std::size_t b, std::size_t e) {
    bool earlier_backward_done = false;
    {
      const std::lock_guard lock(mutex);
      if (!armed) {
        // An earlier backward of an accumulated step reduces nothing, but
        // stage 3 still releases a bucket once its layers are done with it.
        if (!sharded || !sharded->shards_parameters()) return;
        earlier_backward_done = ++accumulated[b] == static_cast<std::int64_t>(buckets[b].entries.size());
        if (!earlier_backward_done) return;
      } else {
        DDL_CHECK(!launched[b],
                  "DataParallel: parameter '{}' received a second gradient after its bucket was sent; "
                  "with weights used twice per step, construct DataParallel with overlap = Overlap::off (and "
                  "sharding none or optimizer)",
                  buckets[b].entries[e].name);
      }
    }
    if (earlier_backward_done) return sharded->release(b);
    if (sharded) sharded->ensure_buffer(b);
    copy_in(b, buckets[b].entries[e]);
    bool full = false;
    {
      const std::lock_guard lock(mutex);
      full = ++ready[b] == static_cast<std::int64_t>(buckets[b].entries.size());
    }
    if (full) {
      // Stage 3: the bucket's layers are through with their parameters.
      if (sharded) sharded->release(b);
      if (timeline::recording()) {
        timeline::instant("communication", "bucket ready",
                          {{"step", statistics.steps}, {"bucket", static_cast<std::int64_t>(b)}});
      }
      hand_on(b);
    }
  }
};

DataParallel::DataParallel(Communicator comm, DataParallelOptions options)
    : state_(std::make_shared<State>(std::move(comm), options)) {
  config::check_environment();  // a bad DDL_* value named here, not in a later wait
  DataParallelOptions& o = state_->options;
  if (o.bucket_bytes == 0) o.bucket_bytes = config::fusion_threshold_bytes();
  DDL_CHECK(o.bucket_bytes > 0, "DataParallel: bucket_bytes must be positive, got {}", o.bucket_bytes);
  if (o.first_bucket_bytes == 0) o.first_bucket_bytes = std::min(BucketSizes{}.first_bytes, o.bucket_bytes);
  DDL_CHECK(o.first_bucket_bytes > 0, "DataParallel: first_bucket_bytes must be positive, got {}",
            o.first_bucket_bytes);
  DDL_CHECK(o.algorithm != AllreduceAlgorithm::automatic,
            "DataParallel: allreduce auto is a request that make_setup resolves (choose_allreduce); name an "
            "algorithm here");
  DDL_CHECK(!o.fp16_compression || o.algorithm == AllreduceAlgorithm::ring,
            "DataParallel: fp16 compression is implemented for the ring allreduce only, not {}",
            algorithm_name(o.algorithm));
  if (o.sharding != Sharding::none) {
    DDL_CHECK(has_halves(o.algorithm),
              "DataParallel: sharding {} needs a reduce-scatter and an allgather, which ring, rhd and builtin have "
              "and {} has not",
              sharding_name(o.sharding), algorithm_name(o.algorithm));
    DDL_CHECK(!o.fp16_compression,
              "DataParallel: sharding {} gathers the parameters themselves, which float16 on the wire would round; "
              "use fp16 compression without sharding",
              sharding_name(o.sharding));
  }
}

DataParallel::~DataParallel() {
  if (state_->worker.joinable()) {
    state_->worker.request_stop();
    state_->changed.notify_all();
    state_->worker.join();
  }
}

int DataParallel::rank() const { return state_->comm.rank(); }
int DataParallel::world_size() const { return state_->comm.size(); }
const Communicator& DataParallel::communicator() const { return state_->comm; }
const DataParallelOptions& DataParallel::options() const { return state_->options; }
std::size_t DataParallel::bucket_count() const { return state_->buckets.size(); }
bool DataParallel::overlapping() const { return state_->overlapping; }
const std::string& DataParallel::overlap_reason() const { return state_->overlap_reason; }
bool DataParallel::reduces_on_gpu() const { return state_->nccl.has_value(); }
const std::vector<GradientBucket>& DataParallel::buckets() const { return state_->buckets; }
SyncStatistics DataParallel::statistics() const { return state_->statistics; }
const ShardedState* DataParallel::sharded_state() const { return state_->sharded.get(); }

void DataParallel::gather_parameters() {
  State& s = *state_;
  if (s.sharded) s.sharded->expect_written_parameters();
}

void DataParallel::whole_parameters(layers::Module& /*model*/) { gather_parameters(); }

std::string DataParallel::describe(std::int64_t shard_batch) const {
  const DataParallelOptions& o = state_->options;
  if (o.sharding == Sharding::none) {
    return fmt::format("data-parallel over {} ranks ({} allreduce, {} per rank)", world_size(),
                       algorithm_name(o.algorithm), shard_batch);
  }
  const int stage = o.sharding == Sharding::optimizer ? 1 : o.sharding == Sharding::gradients ? 2 : 3;
  const char* sharded = stage == 1   ? "optimizer state"
                        : stage == 2 ? "optimizer state and gradients"
                                     : "optimizer state, gradients and parameters";
  return fmt::format(
      "sharded data-parallel over {} ranks (ZeRO stage {}: {} sharded; {} reduce-scatter and "
      "allgather, {} per rank)",
      world_size(), stage, sharded, algorithm_name(o.algorithm), shard_batch);
}

std::vector<std::shared_ptr<optim::Callback>> DataParallel::callbacks(const layers::Module& model) {
  State& s = *state_;
  if (!s.memory) {
    std::vector<Device> devices;
    for (const Tensor& parameter : model.parameters()) {
      if (std::find(devices.begin(), devices.end(), parameter.device()) == devices.end())
        devices.push_back(parameter.device());
    }
    s.memory = std::make_shared<optim::StepMemoryMonitor>(devices);
  }
  return {s.memory};
}

namespace {

// ZeRO's formula for a stage, in its paper's terms (float32 bytes).
const char* formula_text(Sharding sharding) {
  switch (sharding) {
    case Sharding::none:
      return "(4 + 4 + K) P";
    case Sharding::optimizer:
      return "(4 + 4) P + K P / N";
    case Sharding::gradients:
      return "4 P + (4 + K) P / N";
    case Sharding::parameters:
      return "(4 + 4 + K) P / N";
  }
  return "";
}

}  // namespace

std::string DataParallel::report(const layers::Module& model, const optim::Optimizer& optimizer) {
  const State& s = *state_;
  const std::size_t buckets = bucket_count();
  std::string text =
      fmt::format("gradient synchronisation: {:.1f}% of step time spent waiting ({} bucket{}, overlap {})\n",
                  100.0 * statistics().fraction_waiting(), buckets, buckets == 1 ? "" : "s", overlap_reason());
  // Each rank's row, gathered: the state it keeps, its peak activations
  // (-1: not measured), its peak resident set and what it sent per step
  // (-1: not counted, where MPI's or NCCL's own collectives send).
  const StateBytes held = resident_state(model, optimizer);
  double activations = -1.0;
  if (s.memory) {
    activations = 0.0;
    for (const optim::StepMemory& peak : s.memory->peaks())
      activations = std::max(activations, static_cast<double>(peak.peak_activation_bytes));
  }
  const bool counted = !s.nccl && s.options.algorithm != AllreduceAlgorithm::builtin &&
                       s.options.algorithm != AllreduceAlgorithm::shm && s.statistics.steps > 0;
  const double sent =
      counted ? static_cast<double>(s.statistics.bytes_sent) / static_cast<double>(s.statistics.steps) : -1.0;
  const std::array<double, 6> mine{static_cast<double>(held.parameters), static_cast<double>(held.gradients),
                                   static_cast<double>(held.optimizer),  activations,
                                   optim::peak_resident_bytes(),         sent};
  const std::vector<double> rows = allgather_values(s.comm, std::span<const double>(mine));
  const auto mib_or_dash = [](double bytes) {
    return bytes < 0.0 ? std::string("-") : fmt::format("{:.2f}", optim::mebibytes(bytes));
  };
  text += fmt::format("training state per rank, sharding {}:\n{:<6} {:>11} {:>10} {:>10} {:>11} {:>9} {:>14}\n",
                      sharding_name(s.options.sharding), "rank", "params MiB", "grads MiB", "optim MiB", "activ. MiB",
                      "peak RSS", "sent/step MiB");
  for (std::size_t r = 0; r < rows.size() / mine.size(); ++r) {
    const double* row = rows.data() + r * mine.size();
    text += fmt::format("{:<6} {:>11.2f} {:>10.2f} {:>10.2f} {:>11} {:>8.0f}M {:>14}\n", r, optim::mebibytes(row[0]),
                        optim::mebibytes(row[1]), optim::mebibytes(row[2]), mib_or_dash(row[3]),
                        optim::mebibytes(row[4]), mib_or_dash(row[5]));
  }
  const StateBytes formula = formula_state(model, optimizer);
  std::int64_t parameters = 0;
  for (const Tensor& parameter : model.parameters()) parameters += parameter.numel();
  text += fmt::format(
      "ZeRO's formula {} (P = {} parameters, K = {} bytes of optimizer state each, N = {}): {:.2f}, "
      "{:.2f} and {:.2f} MiB\n",
      formula_text(s.options.sharding), parameters, 4 * optimizer.buffer_names().size(), world_size(),
      optim::mebibytes(static_cast<double>(formula.parameters)),
      optim::mebibytes(static_cast<double>(formula.gradients)),
      optim::mebibytes(static_cast<double>(formula.optimizer)));
  if (s.sharded && s.sharded->shards_parameters()) {
    text += fmt::format("parameters gathered at once: at most {} bucket{}, {:.2f} MiB\n",
                        s.sharded->peak_gathered_groups(), s.sharded->peak_gathered_groups() == 1 ? "" : "s",
                        optim::mebibytes(static_cast<double>(s.sharded->peak_gathered_bytes())));
  }
  return text;
}

void DataParallel::prepare(layers::Module& model, optim::Optimizer* optimizer) {
  State& s = *state_;
  // Stage 3, prepared again (after a checkpoint load, or saving one, which
  // releases what it gathered): the broadcast reads and writes the whole
  // parameters, whose chunks reshard() below keeps.
  if (s.sharded) s.sharded->expect_written_parameters();
  // Sharded, the optimizer's state is not broadcast: every rank's is fresh
  // or read from the checkpoint every rank read, and asking for the whole
  // (Optimizer::state) would make it, where sharding makes only the slices.
  broadcast_initial_state(s.comm, model, s.options.sharding != Sharding::none ? nullptr : optimizer, "DataParallel");
  if (s.prepared) {  // after a checkpoint load: buckets and hooks stand
    s.slice(optimizer);
    if (s.sharded) s.sharded->reshard();
    return;
  }

  const auto parameters = model.named_parameters();
  // A model on one GPU keeps its buckets there, the gradients as views into
  // them.
  const bool gpu_buckets = !parameters.empty() && on_one_gpu(parameters);
  const std::optional<Device> gpu =
      gpu_buckets ? std::optional<Device>(parameters.front().second.device()) : std::nullopt;
  // Sharded gradients (stages 2 and 3) make each bucket's buffer only while
  // it is filled and reduced (ShardedState::ensure_buffer): none at set-up,
  // where the model is still whole.
  const bool lazy_buffers = s.options.sharding == Sharding::gradients || s.options.sharding == Sharding::parameters;
  s.buckets = make_buckets(parameters, {.first_bytes = s.options.first_bucket_bytes, .bytes = s.options.bucket_bytes},
                           gpu_buckets, !lazy_buffers);
  const bool on_gpu = reduce_on_gpu(s.comm, s.options, gpu);
  std::vector<std::string> layout = describe_layout(s.buckets);
  layout.push_back(fmt::format("{} allreduce{}, sharding {}, {}", algorithm_name(s.options.algorithm),
                               s.options.fp16_compression ? " (float16 on the wire)" : "",
                               sharding_name(s.options.sharding),
                               on_gpu        ? "on the GPU over NCCL"
                               : gpu_buckets ? "GPU buckets through host memory over MPI"
                                             : "host buckets over MPI"));
  agree_on_layout(s.comm, layout, "DataParallel: the gradient buckets");
  // A single bucket is full only when backward ends, so there is nothing to
  // overlap: the training thread reduces it itself, sparing the hand-off to
  // the communication thread and back (measured: about 2 points of 2-rank
  // efficiency on a model whose gradients made one bucket).
  OverlapDecision overlap = decide_overlap(s.options.overlap, s.buckets.size(), gpu_buckets, s.comm.local_size());
  // Stage 3 over NCCL gathers parameters on one NCCL communicator while the
  // gradients are reduce-scattered on another. NCCL asks that the ranks
  // issue the operations of two communicators in one order, or they may
  // deadlock; threads of their own (the communication thread, the prefetch)
  // would issue them in whatever order each rank's timing gives, so here
  // the training thread issues both, in program order.
  if (on_gpu && s.options.sharding == Sharding::parameters) {
    DDL_CHECK(s.options.overlap != Overlap::on,
              "DataParallel: sharding parameters over NCCL cannot overlap: its gathers and reduce-scatters use two "
              "NCCL communicators, whose operations every rank must issue in one order; use overlap auto or off");
    if (overlap.on)
      overlap = {false,
                 "off (sharding parameters over NCCL: one thread issues the two communicators' "
                 "operations, in one order on every rank)"};
  }
  s.overlapping = overlap.on;
  s.overlap_reason = overlap.reason;
  if (s.options.sharding != Sharding::none) {
    // Stage 3 prefetches the next bucket's parameters where buckets overlap
    // backward; the parameters are gathered where the gradients are reduced.
    s.sharded = std::make_shared<ShardedState>(s.options.sharding, s.buckets, s.comm, s.options.algorithm,
                                               s.overlapping, on_gpu);
    s.slice(optimizer);
    s.sharded->reshard();
  }
  if (gpu_buckets) {
    for (std::size_t b = 0; b < s.buckets.size(); ++b) s.written.emplace_back(gpu->index());
  }
  if (on_gpu) {
    s.nccl = NcclCommunicator::create(s.comm, gpu->index());
    // NCCL connects two ranks on their first message: made here, on a
    // tiny buffer, rather than in the middle of the first step.
    allreduce(*s.nccl, zeros({s.comm.size()}, {DType::Float32, *gpu, false}), s.options.algorithm);
  } else if (gpu_buckets) {
    // Sharding stage 2 makes the buckets' buffers later, of these sizes.
    for (const GradientBucket& bucket : s.buckets) {
      s.staging.emplace_back(gpu->index(), static_cast<std::size_t>(bucket.size()) * sizeof(float));
    }
  }
  s.ready.assign(s.buckets.size(), 0);
  s.accumulated.assign(s.buckets.size(), 0);
  s.launched.assign(s.buckets.size(), false);
  s.reduced = s.buckets.size();
  const std::weak_ptr<State> weak = state_;
  for (std::size_t b = 0; b < s.buckets.size(); ++b) {
    for (std::size_t e = 0; e < s.buckets[b].entries.size(); ++e) {
      s.buckets[b].entries[e].parameter.register_grad_hook([weak, b, e](Tensor&) {
        if (const auto state = weak.lock()) state->on_gradient(b, e);
      });
    }
  }
  if (s.overlapping) {
    s.worker = std::jthread([&s](const std::stop_token& stop) { s.serve(stop); });
  }
  s.prepared = true;
}

Device DataParallel::device(DeviceType type) {
  if (type != DeviceType::CUDA) return Strategy::device(type);
  return local_gpu(state_->comm, "DataParallel", "data parallelism");
}

void DataParallel::begin_step(layers::Module& model) {
  State& s = *state_;
  DDL_CHECK(s.prepared, "DataParallel: prepare() must run before the first step (the Trainer does it)");
  {
    // A step that threw part-way (out of memory in backward, say) may have
    // left the communication thread reducing a bucket it was handed: wait
    // until it is idle before the buckets, their marks and the counts are
    // reused, and drop a failure of that abandoned step.
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return !s.next_bucket_launched(); });
    s.failure = nullptr;
  }
  {
    const timeline::Span span("communication", "stall check");
    s.stall_inspector.arrive(s.statistics.steps, "the gradient allreduce");
  }
  s.step_start = Clock::now();
  s.sent_mark = s.bytes_sent();
  // Gradients start as zeros inside the buckets, where backward accumulates
  // them; a parameter on another device than its bucket starts without one.
  Strategy::begin_step(model);
  for (GradientBucket& bucket : s.buckets) {
    if (!bucket.buffer.defined()) continue;  // sharding stages 2 and 3: made when its first gradient comes
    backend::fill_zero(bucket.buffer.device(), bucket.buffer.raw_data(), bucket.buffer.nbytes());
    for (const BucketEntry& entry : bucket.entries) {
      if (entry.view.defined()) entry.parameter.set_grad(entry.view);
    }
  }
  const std::lock_guard lock(s.mutex);
  std::fill(s.ready.begin(), s.ready.end(), 0);
  std::fill(s.launched.begin(), s.launched.end(), false);
  s.reduced = 0;
  s.armed = false;
}

optim::StepOutput DataParallel::forward_backward(layers::Module& model, const optim::LossFunction& loss,
                                                 const optim::Batch& batch, const optim::StepShare& share) {
  // Only the step's last backward completes the gradients: earlier ones
  // accumulate into the buckets without sending them (DDP's no_sync).
  if (share.last) expect_final_gradients();
  const State& s = *state_;
  if (!s.sharded || !s.sharded->shards_parameters()) return Strategy::forward_backward(model, loss, batch, share);
  optim::StepOutput result;
  {
    const timeline::Span span("compute", "forward");
    result.output = gathered_forward(model, batch.inputs, s.sharded, true);
    result.loss = loss(result.output, batch.targets);
  }
  {
    const std::lock_guard lock(state_->mutex);
    std::fill(state_->accumulated.begin(), state_->accumulated.end(), 0);
  }
  backward(result, share);
  // An earlier batch of an accumulated step: buckets whose parameters got no gradient.
  if (!share.last) s.sharded->release_all();
  return result;
}

optim::StepOutput DataParallel::forward(layers::Module& model, const optim::Batch& batch,
                                        const optim::LossFunction& loss) {
  const State& s = *state_;
  if (!s.sharded || !s.sharded->shards_parameters()) return Strategy::forward(model, batch, loss);
  optim::StepOutput result;
  result.output = gathered_forward(model, batch.inputs, s.sharded, false);
  if (loss) result.loss = loss(result.output, batch.targets);
  return result;
}

void DataParallel::expect_final_gradients() {
  State& s = *state_;
  const std::lock_guard lock(s.mutex);
  s.armed = s.reduce_during_backward();
}

void DataParallel::synchronize_gradients(layers::Module& /*model*/) {
  const timeline::Span span("communication", "synchronize gradients");
  State& s = *state_;
  const auto wait_start = Clock::now();
  {
    const std::lock_guard lock(s.mutex);
    s.armed = false;
  }
  // Buckets not yet handed on: all of them when backward does not reduce;
  // else those some of whose parameters got no gradient in the last
  // backward (none this step: zeros; or, with accumulation, only from
  // earlier batches, whose hooks were disarmed). Each entry is copied in
  // (a no-op for a gradient that is the bucket's view) and the bucket sent.
  for (std::size_t b = 0; b < s.buckets.size(); ++b) {
    {
      const std::lock_guard lock(s.mutex);
      if (s.launched[b]) continue;
    }
    if (s.sharded) s.sharded->ensure_buffer(b);
    for (const BucketEntry& entry : s.buckets[b].entries) s.copy_in(b, entry);
    s.hand_on(b);
  }
  if (s.overlapping) {
    const timeline::Span wait("communication", "wait for gradients");
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return s.reduced == s.buckets.size(); });
    if (s.failure) std::rethrow_exception(std::exchange(s.failure, nullptr));
  }
  // Unsharded, the buckets hold the average, which is each parameter's
  // gradient (copied back where it is not a view into the bucket).
  // Sharded, only the optimizer's slices have one.
  for (GradientBucket& bucket : s.sharded ? std::span<GradientBucket>() : std::span<GradientBucket>(s.buckets)) {
    for (const BucketEntry& entry : bucket.entries) {
      Tensor grad = entry.parameter.grad();
      if (entry.in_buffer(grad)) continue;
      if (!grad.defined()) {
        grad = Tensor::empty(entry.parameter.shape(), {DType::Float32, entry.parameter.device(), false});
        entry.parameter.set_grad(grad);
      }
      backend::copy_bytes(grad.device(), grad.raw_data(), bucket.buffer.device(), bucket.data() + entry.offset,
                          grad.nbytes());
    }
  }
  // Stage 3: buckets gathered in backward that received no gradient.
  if (s.sharded) s.sharded->release_all();
  const auto end = Clock::now();
  s.statistics.wait_seconds += std::chrono::duration<double>(end - wait_start).count();
  s.statistics.step_seconds += std::chrono::duration<double>(end - s.step_start).count();
  ++s.statistics.steps;
  s.count_traffic();
}

void DataParallel::update(layers::Module& model, optim::Optimizer& optimizer) {
  State& s = *state_;
  if (s.sharded) {
    s.sharded->step(optimizer);
  } else {
    Strategy::update(model, optimizer);
  }
  s.count_traffic();
}

void DataParallel::gather_state(const layers::Module& /*model*/, optim::TrainingState& state) {
  State& s = *state_;
  if (!s.sharded) return;
  s.sharded->gather_model_state(state.model);
  if (s.sharded->sliced()) s.sharded->gather_optimizer_state(state.optimizer);
}

void DataParallel::select_state(const layers::Module& /*model*/, optim::TrainingState& state) {
  State& s = *state_;
  if (!s.sharded) return;
  // Stage 3: the loader writes the parameters themselves (and may put the
  // old ones back): whole from here until the next gather keeps their chunks.
  s.sharded->expect_written_parameters();
  if (s.sharded->sliced()) s.sharded->select_optimizer_state(state.optimizer);
}

StateBytes DataParallel::resident_state(const layers::Module& model, const optim::Optimizer& optimizer) const {
  const State& s = *state_;
  StateBytes bytes;
  if (s.sharded) {
    bytes = s.sharded->resident();
  } else {
    for (const auto& [name, parameter] : model.named_parameters())
      bytes.parameters += static_cast<std::int64_t>(parameter.nbytes());
    for (const GradientBucket& bucket : s.buckets) bytes.gradients += static_cast<std::int64_t>(bucket.buffer.nbytes());
  }
  bytes.optimizer = optimizer.state_bytes();
  return bytes;
}

StateBytes DataParallel::formula_state(const layers::Module& model, const optim::Optimizer& optimizer) const {
  std::int64_t parameters = 0;
  for (const auto& [name, parameter] : model.named_parameters()) parameters += parameter.numel();
  return zero_formula(state_->options.sharding, parameters, static_cast<std::int64_t>(optimizer.buffer_names().size()),
                      world_size());
}

void DataParallel::sum_over_ranks(std::vector<double>& values) { state_->comm.sum_doubles(values); }

}  // namespace ddl::parallel
