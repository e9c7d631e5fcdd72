// The pipeline strategy (see pipeline.hpp): the stage's schedule run with
// non-blocking messages, and the hooks the Trainer calls.
#include <ddl/parallel/strategies/pipeline/pipeline.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/deferred_gradients.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/packed_weights.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/config.hpp>
#include <ddl/parallel/strategies/pipeline/stage_links.hpp>
#include <ddl/parallel/strategies/pipeline/stage_state.hpp>
#include <ddl/parallel/tensor/tensor_state.hpp>

namespace ddl::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Tags: one per chunk and micro-batch for activations and for gradients
// (kind + chunk * M + m, M * chunks <= kMaxMicroBatches), so the messages of
// one step match whatever order MPI delivers them in. A stage may start its
// next step while the stages after it finish this one (the steps overlap),
// so the same tag can be in flight for two steps: MPI matches the messages
// of one source and tag in the order they were sent, and each step posts
// all its receives before its first action, so each goes to its own step.
constexpr int kMaxMicroBatches = 4096;
constexpr int kActivationTag = 0x1000;
constexpr int kGradientTag = 0x2000;
constexpr int kShapeTag = 0x3000;
constexpr int kOutputTag = 0x3001;
constexpr int kLossTag = 0x3002;
// Each stage draws its dropout masks from its own block of the generator's
// counters per step, so stages never share masks, and every stage ends a
// step at the same offset (the one a checkpoint saves): resuming is exact.
constexpr std::uint64_t kGeneratorBlock = std::uint64_t{1} << 32;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct MicroBatch {
  std::int64_t offset = 0;
  std::int64_t size = 0;
};

// min(M, samples) micro-batches whose sizes differ by at most one.
std::vector<MicroBatch> cut_batch(std::int64_t samples, int micro_batches) {
  const std::int64_t count = std::max<std::int64_t>(1, std::min<std::int64_t>(micro_batches, samples));
  const std::int64_t base = samples / count, larger = samples % count;
  std::vector<MicroBatch> cuts;
  std::int64_t offset = 0;
  for (std::int64_t m = 0; m < count; ++m) {
    const std::int64_t size = base + (m < larger ? 1 : 0);
    cuts.push_back({offset, size});
    offset += size;
  }
  return cuts;
}

Shape sample_shape(const Shape& shape) {
  const auto dims = shape.to_vector();
  return Shape(std::vector<std::int64_t>(dims.begin() + 1, dims.end()));
}

Shape with_batch(std::int64_t batch, const Shape& sample) {
  std::vector<std::int64_t> dims{batch};
  for (const std::int64_t d : sample.to_vector()) dims.push_back(d);
  return Shape(dims);
}

// A sample shape on the wire: its rank, then its dims.
constexpr std::size_t kMaxShapeRank = 8;
using ShapeMessage = std::array<std::int64_t, kMaxShapeRank + 1>;

void send_shape(const Communicator& comm, const Shape& shape, int peer) {
  const auto dims = shape.to_vector();
  DDL_CHECK(dims.size() <= kMaxShapeRank, "Pipeline: a stage boundary carries a {}-d sample; at most {} dims",
            dims.size(), kMaxShapeRank);
  ShapeMessage message{};
  message[0] = static_cast<std::int64_t>(dims.size());
  std::copy(dims.begin(), dims.end(), message.begin() + 1);
  comm.send(std::as_bytes(std::span(message)), peer, kShapeTag);
}

Shape recv_shape(const Communicator& comm, int peer) {
  ShapeMessage message{};
  comm.recv(std::as_writable_bytes(std::span(message)), peer, kShapeTag);
  return Shape(std::vector<std::int64_t>(message.begin() + 1, message.begin() + 1 + message[0]));
}

// The output sample shape of `model` for an input sample, from one zero
// sample in evaluation mode: nothing recorded, no statistics updated.
Shape probe_output(layers::Module& model, const Shape& input, const Device& device) {
  const bool training = model.is_training();
  model.eval();
  Tensor output;
  {
    const NoGradGuard no_grad;
    output = model.forward(zeros(with_batch(1, input), {DType::Float32, device, false}));
  }
  model.train(training);
  return sample_shape(output.shape());
}

// The action before which a hybrid's buckets may go out as they fill: from
// there on every gradient gets exactly one more accumulation. That is the
// stage's last backward (biases, convolutions), unless several weight
// gradients still follow it (ZB-H1 holds some back): then the last of them,
// and the buckets whose last accumulation came earlier go out at
// synchronize_gradients instead.
const PipelineAction* final_accumulations(const std::vector<PipelineAction>& actions) {
  using Kind = PipelineAction::Kind;
  const auto last_backward =
      std::find_if(actions.rbegin(), actions.rend(), [](const PipelineAction& a) { return a.kind == Kind::Backward; });
  if (last_backward == actions.rend()) return nullptr;
  const auto weights_after =
      std::count_if(actions.rbegin(), last_backward, [](const PipelineAction& a) { return a.kind == Kind::Weight; });
  return weights_after > 1 ? &actions.back() : &*last_backward;
}

Device stage_device(const layers::Module& model, const optim::Batch& batch) {
  const std::vector<Tensor> parameters = model.parameters();
  return parameters.empty() ? batch.inputs.device() : parameters.front().device();
}

// The weights whose gradients wait for the Weight actions: every Dense
// weight, and where each micro-batch's W is its own (its rows kept only
// until that W), the convolutions' too. Kept to the batch's end, a
// convolution's rows would be its input and output images of every
// micro-batch: the activations 1F1B frees after each backward.
std::vector<Tensor> deferred_weights(const layers::Module& model, WeightGradients weights) {
  std::vector<Tensor> chosen;
  for (const Tensor& parameter : model.parameters()) {
    if (parameter.dim() == 2 || (parameter.dim() > 2 && weights == WeightGradients::per_micro_batch)) {
      chosen.push_back(parameter);
    }
  }
  return chosen;
}

}  // namespace

std::string_view pack_weights_name(PackWeights mode) {
  switch (mode) {
    case PackWeights::Auto:
      return "auto";
    case PackWeights::On:
      return "on";
    case PackWeights::Off:
      return "off";
  }
  return "unknown";
}

std::vector<PackWeights> all_pack_weights() { return {PackWeights::Auto, PackWeights::On, PackWeights::Off}; }

bool packs_weights(PackWeights mode, std::size_t micro_batches) {
  switch (mode) {
    case PackWeights::Auto:
      return micro_batches >= kPackFromMicroBatches;
    case PackWeights::On:
      return micro_batches > 1;
    case PackWeights::Off:
      return false;
  }
  return false;
}

struct Pipeline::State {
  State(Communicator world_ranks, Communicator pipeline, std::vector<StageRange> stage_ranges,
        PipelineOptions pipeline_options)
      : world(std::move(world_ranks)),
        comm(std::move(pipeline)),
        stages(std::move(stage_ranges)),
        options(pipeline_options),
        stage(comm.rank()) {}

  Communicator world;                       // every rank of the strategy: agreement
  Communicator comm;                        // this pipeline, one rank per stage
  std::optional<Communicator> data;         // hybrid: this stage in every pipeline
  std::shared_ptr<DataParallel> gradients;  // hybrid: averages the stage's gradients over `data`
  // With tensor groups: this stage's, the plan, and the ranks of this
  // tensor rank in every stage and pipeline (metrics counted once per group).
  std::shared_ptr<const TensorGroup> tensor;
  std::optional<TensorPlan> plan;
  std::optional<Communicator> tensor_peers;
  // What the tensor group's allreduces sent in training steps so far.
  std::int64_t tensor_bytes = 0;
  std::vector<StageRange> stages;  // of the model: ranks x chunks
  PipelineOptions options;
  // Where the weight gradients are computed: as the schedule places them
  // (ZB-H1, ZB-H2, ZB-V), else at the batch's end or after each backward,
  // as asked.
  WeightGradients weights = WeightGradients::at_batch_end;
  int stage = 0;
  int chunks = 1;  // of the model on each rank
  ChunkLayout layout = ChunkLayout::looped;
  // Each chunk of the stage's model as a Sequential of its own layers (the
  // model itself when there is one), made for `chunked`.
  const layers::Module* chunked = nullptr;
  std::vector<std::shared_ptr<layers::Sequential>> chunk_models;
  // Learned at the first batch: each chunk's sample shapes at its input and
  // output, and (on rank 0) at the model's output.
  std::vector<Shape> input_samples, output_samples;
  std::optional<Shape> model_output_sample;
  // How activations and gradients travel, chosen at the first batch too.
  std::optional<StageLinks> links;
  PipelineStatistics statistics;
  // This stage's actions for a step of `listed_micro_batches` (0: none yet),
  // made again only when the count changes (a short last batch): ZB-V's come
  // from running the ranks on the schedule's costs, and from its measured
  // times twice, with two simulations to choose between them.
  std::vector<PipelineAction> listed;
  int listed_micro_batches = 0;
  const std::vector<PipelineAction>& actions(int micro_batches) {
    if (micro_batches != listed_micro_batches) {
      listed = stage_actions(options.schedule, stage, ranks(), micro_batches, weights, chunks, options.schedule_costs);
      listed_micro_batches = micro_batches;
    }
    return listed;
  }

  int ranks() const { return comm.size(); }
  int model_stages() const { return static_cast<int>(stages.size()); }
  // The model stage `chunk` of this rank holds, and who holds a model stage.
  int stage_of(int chunk) const { return model_stage(layout, stage, chunk, ranks()); }
  ChunkHolder holder(int model_stage_index) const { return stage_holder(layout, model_stage_index, ranks()); }
  // Whether this rank computes the loss (holds the model's last stage).
  bool holds_loss() const { return holder(model_stages() - 1).rank == stage; }
  std::vector<StageRange> ranges_of(int rank) const {
    std::vector<StageRange> ranges;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      ranges.push_back(stages[static_cast<std::size_t>(model_stage(layout, rank, chunk, ranks()))]);
    }
    return ranges;
  }

  // The chunks of the stage's model `model`, each a Sequential of its own
  // layers sharing them with `model` (recomputed as one segment each when
  // asked); `model` itself when there is one chunk.
  const std::vector<std::shared_ptr<layers::Sequential>>& chunks_of(layers::Module& model) {
    if (chunked == &model) return chunk_models;
    auto& sequential = dynamic_cast<layers::Sequential&>(model);
    chunk_models.clear();
    if (chunks == 1) {
      chunk_models.emplace_back(std::shared_ptr<layers::Sequential>(), &sequential);  // not owned
    } else {
      std::size_t child = 0;
      for (const StageRange& range : ranges_of(stage)) {
        auto chunk = std::make_shared<layers::Sequential>();
        for (std::size_t i = 0; i < range.size(); ++i, ++child) {
          const auto& [name, module] = sequential.children()[child];
          chunk->add(name, module);
        }
        chunk_models.push_back(std::move(chunk));
      }
    }
    if (options.recompute) {
      for (const auto& chunk : chunk_models) chunk->recompute({{0, chunk->size() - 1}});
    }
    chunked = &model;
    return chunk_models;
  }

  // Passes the sample shapes down the model's stages once: the holder of
  // stage k learns its input from stage k - 1's (over MPI unless it holds
  // that too), runs a probe, and tells stage k + 1's holder (and rank 0, from
  // the last stage, the shape of the model's output). Each rank goes through
  // its chunks in model order, so every wait is on an earlier stage.
  void learn_shapes(layers::Module& model, const optim::Batch& batch) {
    if (links) return;
    const Device device = stage_device(model, batch);
    const auto models = chunks_of(model);
    // A chunk's own Sequential keeps a training flag of its own, which the
    // probe would leave on the shared layers: the stage's model says.
    const bool training = model.is_training();
    std::vector<Shape> inputs, outputs;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const int k = stage_of(chunk);
      Shape input = sample_shape(batch.inputs.shape());
      if (k > 0) {
        const ChunkHolder before = holder(k - 1);
        input = before.rank == stage ? outputs[static_cast<std::size_t>(before.chunk)] : recv_shape(comm, before.rank);
      }
      inputs.push_back(input);
      outputs.push_back(probe_output(*models[static_cast<std::size_t>(chunk)], input, device));
      model.train(training);
      if (k + 1 < model_stages() && holder(k + 1).rank != stage) send_shape(comm, outputs.back(), holder(k + 1).rank);
      if (k + 1 == model_stages() && stage != 0) send_shape(comm, outputs.back(), 0);
    }
    if (stage == 0) {
      model_output_sample = holds_loss() ? outputs[static_cast<std::size_t>(holder(model_stages() - 1).chunk)]
                                         : recv_shape(comm, holder(model_stages() - 1).rank);
    }
    input_samples = std::move(inputs);
    output_samples = std::move(outputs);
    links.emplace(comm, device, options.nccl && chunks == 1);
  }
};

// One batch through this stage: the messages of every micro-batch, posted
// before the first action, and what a micro-batch's backward needs from its
// forward (its input, whose gradient goes back, and its output or loss).
// With several chunks per rank, each action is one chunk's, and what
// passes between two chunks on this rank (ZB-V's turn) is handed over here.
class Pipeline::StageRun {
 public:
  StageRun(Pipeline::State& state, layers::Module& model, const optim::Batch& batch, bool training,
           const optim::LossFunction& loss)
      : s_(state),
        models_(state.chunks_of(model)),
        batch_(batch),
        training_(training),
        loss_(loss),
        cuts_(cut_batch(batch.size(), state.options.micro_batches)),
        device_(stage_device(model, batch)),
        deferred_(deferred_weights(model, state.weights)) {
    const auto count = cuts_.size();
    if (packs_weights(s_.options.pack_weights, count) && device_.type() == DeviceType::CPU) {
      packed_.emplace(model.parameters());
    }
    const std::size_t slots = count * static_cast<std::size_t>(s_.chunks);
    inputs_.resize(slots);
    outputs_.resize(slots);
    handed_activations_.resize(slots);
    handed_gradients_.resize(slots);
    activations_in_.resize(slots);
    gradients_in_.resize(slots);
    losses_.resize(count);
    for (int chunk = 0; chunk < s_.chunks; ++chunk) {
      const int k = s_.stage_of(chunk);
      const auto c = static_cast<std::size_t>(chunk);
      for (std::size_t m = 0; m < count; ++m) {
        const int micro_batch = static_cast<int>(m);
        if (k > 0 && s_.holder(k - 1).rank != s_.stage) {
          activations_in_[slot(micro_batch, chunk)] = s_.links->receive(
              s_.holder(k - 1).rank, StageLinks::Carries::activation, with_batch(cuts_[m].size, s_.input_samples[c]),
              tag(kActivationTag, micro_batch, chunk));
        }
        if (training_ && k + 1 < s_.model_stages() && s_.holder(k + 1).rank != s_.stage) {
          gradients_in_[slot(micro_batch, chunk)] =
              s_.links->receive(s_.holder(k + 1).rank, StageLinks::Carries::gradient,
                                with_batch(cuts_[m].size, s_.output_samples[c]), tag(kGradientTag, micro_batch, chunk));
        }
      }
    }
    if (s_.stage == 0 && !s_.holds_loss()) {
      const int last = s_.holder(s_.model_stages() - 1).rank;
      output_in_.mpi =
          s_.comm.irecv(with_batch(batch.size(), *s_.model_output_sample), DType::Float32, last, kOutputTag);
      if (loss_) loss_in_.mpi = s_.comm.irecv({}, DType::Float32, last, kLossTag);
    }
  }

  int micro_batches() const { return static_cast<int>(cuts_.size()); }
  // Where `micro_batch` of `chunk` keeps its activations, and the weight
  // rows its backward keeps for the W actions.
  std::size_t slot(int micro_batch, int chunk) const {
    return static_cast<std::size_t>(chunk) * cuts_.size() + static_cast<std::size_t>(micro_batch);
  }

  void forward(int m, int chunk) {
    timeline::Span span("compute", "forward");
    span.arg("micro-batch", m);
    if (s_.chunks > 1) span.arg("chunk", chunk);
    const auto start = Clock::now();
    const MicroBatch& cut = cuts_[static_cast<std::size_t>(m)];
    const int k = s_.stage_of(chunk);
    const std::size_t i = slot(m, chunk);
    Tensor input;
    if (k == 0) {
      input = slice(batch_.inputs, cut.offset, cut.offset + cut.size);
    } else if (s_.holder(k - 1).rank == s_.stage) {
      input = std::exchange(handed_activations_[i], Tensor());
    } else {
      input = take(activations_in_[i], "receive activation", m);
    }
    if (training_ && k > 0) input.set_requires_grad(true);  // its gradient goes back to the stage before
    Tensor output = models_[static_cast<std::size_t>(chunk)]->forward(input);
    if (k + 1 == s_.model_stages()) {
      results_.push_back(output.detach());
      if (loss_) {
        const Tensor loss = loss_(output, slice(batch_.targets, cut.offset, cut.offset + cut.size));
        loss_sum_ += static_cast<double>(loss.item()) * static_cast<double>(cut.size);
        losses_[static_cast<std::size_t>(m)] = loss;
      }
      if (results_.size() == cuts_.size()) send_results();
    } else if (const ChunkHolder next = s_.holder(k + 1); next.rank == s_.stage) {
      handed_activations_[slot(m, next.chunk)] = output.detach();
    } else {
      send(next.rank, StageLinks::Carries::activation, output, tag(kActivationTag, m, next.chunk));
    }
    if (training_) {
      inputs_[i] = input;
      outputs_[i] = output;
      s_.statistics.peak_micro_batches = std::max(s_.statistics.peak_micro_batches, ++held_);
    }
    compute_seconds_ += seconds_since(start);
  }

  // `loss_scale`: the batch's share of the optimizer step.
  void backward(int m, int chunk, double loss_scale) {
    timeline::Span span("compute", "backward");
    span.arg("micro-batch", m);
    if (s_.chunks > 1) span.arg("chunk", chunk);
    const auto start = Clock::now();
    const int k = s_.stage_of(chunk);
    const std::size_t i = slot(m, chunk);
    // The backward for the inputs: the weight-gradient rows go to deferred_
    // as part i, for the schedule's Weight actions, so their sum is in
    // micro-batch order whatever the schedule.
    const auto backward_inputs = [&](const Tensor& root, const Tensor& gradient) {
      deferred_.backward_inputs(root, gradient, i);
    };
    if (k + 1 == s_.model_stages()) {
      // Each micro-batch's mean loss counts with its share of the batch, so
      // the gradients sum to those of the batch's mean loss.
      const auto mb = static_cast<std::size_t>(m);
      const double scale = loss_scale * static_cast<double>(cuts_[mb].size) / static_cast<double>(batch_.size());
      const Tensor loss = scale == 1.0 ? losses_[mb] : losses_[mb] * static_cast<float>(scale);
      backward_inputs(loss, Tensor());  // with scale 1, bit for bit what one process computes
      losses_[mb] = Tensor();
    } else {
      const Tensor gradient = s_.holder(k + 1).rank == s_.stage ? std::exchange(handed_gradients_[i], Tensor())
                                                                : take(gradients_in_[i], "receive gradient", m);
      // A first stage without parameters has nothing to differentiate.
      if (outputs_[i].requires_grad()) backward_inputs(outputs_[i], gradient);
    }
    if (k > 0) {
      const Tensor gradient = inputs_[i].grad().defined() ? inputs_[i].grad() : zeros_like(inputs_[i]);
      if (const ChunkHolder before = s_.holder(k - 1); before.rank == s_.stage) {
        handed_gradients_[slot(m, before.chunk)] = gradient;
      } else {
        send(before.rank, StageLinks::Carries::gradient, gradient, tag(kGradientTag, m, before.chunk));
      }
    }
    inputs_[i] = outputs_[i] = Tensor();  // the activations go
    --held_;
    s_.statistics.peak_deferred_bytes = std::max(s_.statistics.peak_deferred_bytes, deferred_.bytes());
    compute_seconds_ += seconds_since(start);
  }

  // The weight gradients of `parts` (slots whose backward kept them): the
  // schedule's Weight actions, `first` the first of them.
  void weight_gradients(const std::vector<std::size_t>& parts, const PipelineAction& first) {
    if (deferred_.weights() == 0) return;
    timeline::Span span("compute", "weight gradients");
    if (parts.size() == 1) {  // named as forward's and backward's spans are
      span.arg("micro-batch", first.micro_batch);
      if (s_.chunks > 1) span.arg("chunk", first.chunk);
    } else {
      span.arg("micro-batches", static_cast<std::int64_t>(parts.size()));
    }
    const auto start = Clock::now();
    deferred_.backward_weights(parts);
    compute_seconds_ += seconds_since(start);
  }

  // Waits for the sends; rank 0 returns the batch's output and mean loss,
  // which the last stage sends it, and every other rank nothing.
  optim::StepOutput finish() {
    if (packed_ && training_) {
      s_.statistics.peak_packed_bytes = std::max(s_.statistics.peak_packed_bytes, packed_->bytes());
    }
    {
      const timeline::Span span("communication", "wait for sends");
      for (StageMessage& message : sends_) message.wait();
      if (output_out_) output_out_->request.wait();
      if (loss_out_) loss_out_->request.wait();
    }
    optim::StepOutput result;
    if (s_.stage != 0) return result;
    if (s_.holds_loss()) return {batch_output_, loss_ ? batch_loss_ : Tensor()};
    result.output = take(output_in_, "receive output", -1);
    if (loss_) result.loss = take(loss_in_, "receive loss", -1);
    return result;
  }

  double compute_seconds() const { return compute_seconds_; }

 private:
  // A message's tag: one per chunk and micro-batch of each kind, so the
  // messages of one step match whatever order MPI delivers them in. The
  // receiving chunk's, so that the two ranks name it alike.
  int tag(int kind, int micro_batch, int chunk) const { return kind + chunk * micro_batches() + micro_batch; }

  // The last stage's batch output and mean loss, as soon as its last
  // forward has them: rank 0 reports them, and the verdict on the loss it
  // passes to every stage (agree_on_step) then never waits for the last
  // stage's backward passes.
  void send_results() {
    batch_output_ = results_.size() == 1 ? results_.front() : concat(results_);
    batch_loss_ = full({}, loss_sum_ / static_cast<double>(batch_.size()), {DType::Float32, device_, false});
    if (s_.stage == 0) return;
    output_out_ = s_.comm.isend(batch_output_, 0, kOutputTag);
    if (loss_) loss_out_ = s_.comm.isend(batch_loss_, 0, kLossTag);
  }

  // A received tensor on this stage's device; the wait is not compute time
  // but idle (or transfer) time, which the timeline shows as such.
  Tensor take(StageMessage& message, const char* name, int micro_batch) {
    if (packed_ && training_ && micro_batch >= 0 && packed_->ahead() && !message.arrived()) {
      // What the last batch packed, packed while this message is on its
      // way: the wait hides it, where the first products to need it would
      // not. What the wait leaves is packed at the next one, or by those
      // products.
      const timeline::Span packing("compute", "pack weights");
      packed_->pack_ahead([&] { return message.arrived(); });
    }
    timeline::Span span("communication", name);
    if (micro_batch >= 0) span.arg("micro-batch", micro_batch);
    const auto start = Clock::now();
    Tensor tensor = message.take(device_);
    compute_seconds_ -= seconds_since(start);
    return tensor;
  }

  void send(int peer, StageLinks::Carries what, const Tensor& tensor, int tag) {
    timeline::Span span("communication", what == StageLinks::Carries::activation ? "send activation" : "send gradient");
    span.arg("bytes", static_cast<std::int64_t>(tensor.nbytes()));
    sends_.push_back(s_.links->send(peer, what, tensor, tag));
    if (!training_) return;  // the statistics are the training steps'
    ++s_.statistics.messages;
    s_.statistics.bytes += static_cast<std::int64_t>(tensor.nbytes());
  }

  Pipeline::State& s_;
  const std::vector<std::shared_ptr<layers::Sequential>> models_;  // one per chunk
  const optim::Batch& batch_;
  bool training_;
  const optim::LossFunction& loss_;
  std::vector<MicroBatch> cuts_;
  Device device_;
  // Per slot (chunk and micro-batch): the messages it receives, what another
  // chunk of this rank hands it, and what its backward needs.
  std::vector<StageMessage> activations_in_, gradients_in_;
  std::vector<Tensor> handed_activations_, handed_gradients_, inputs_, outputs_;
  std::vector<StageMessage> sends_;
  StageMessage output_in_, loss_in_;  // rank 0's, from the last stage over MPI
  Tensor batch_output_, batch_loss_;  // the last stage's, once its last forward is done
  std::optional<TensorMessage> output_out_, loss_out_;
  std::vector<Tensor> losses_, results_;  // per micro-batch, on the last stage
  autograd::DeferredWeightGradients deferred_;
  std::optional<PackedWeights> packed_;  // while the batch runs: its weights stay as they are
  double loss_sum_ = 0.0;
  double compute_seconds_ = 0.0;
  int held_ = 0;
};

Pipeline::Pipeline(Communicator comm, std::vector<StageRange> stages, PipelineOptions options)
    : Pipeline(ProcessGrid::split(comm, 1, comm.size()), std::move(stages), options) {}

int micro_batches(const PipelineOptions& options, int stages) {
  return options.micro_batches == 0 ? kMicroBatchesPerStage * stages : options.micro_batches;
}

double PipelineStatistics::idle_fraction() const {
  const double step = steps > 1 ? step_seconds - first_step_seconds : step_seconds;
  const double compute = steps > 1 ? compute_seconds - first_compute_seconds : compute_seconds;
  return step > 0.0 ? 1.0 - compute / step : 0.0;
}

double PipelineStatistics::first_idle_fraction() const {
  return first_step_seconds > 0.0 ? 1.0 - first_compute_seconds / first_step_seconds : 0.0;
}

WeightGradients weight_gradients_of(const PipelineOptions& options) {
  if (places_weights(options.schedule)) return WeightGradients::per_micro_batch;
  return options.defer_weight_gradients ? WeightGradients::at_batch_end : WeightGradients::per_micro_batch;
}

Pipeline::Pipeline(ProcessGrid grid, std::vector<StageRange> stages, PipelineOptions options,
                   std::optional<TensorPlan> tensor)
    : state_(std::make_shared<State>(std::move(grid.world), std::move(grid.pipeline), std::move(stages), options)) {
  config::check_environment();  // a bad DDL_* value named here, not in a later wait
  State& s = *state_;
  DDL_CHECK(grid.tensor.size() == 1 || tensor,
            "Pipeline: a grid of tensor groups of {} ranks needs the plan that splits the stages' layers",
            grid.tensor.size());
  if (tensor) {
    DDL_CHECK(tensor->ranks == grid.tensor.size(),
              "Pipeline: a tensor plan for {} ranks over tensor groups of {} ranks", tensor->ranks, grid.tensor.size());
    DDL_CHECK(options.sharding == Sharding::none,
              "Pipeline: sharding ({}) does not combine with tensor groups: tensor parallelism splits the state of "
              "the layers it splits, and the replicas do not shard the rest",
              sharding_name(options.sharding));
    for (std::size_t i = 1; i < s.stages.size(); ++i) {
      const std::string across = tensor->pair_across(s.stages[i].first);
      DDL_CHECK(across.empty(),
                "Pipeline: stage {} begins at layer {}, inside the tensor-parallel pair {}: its input would be "
                "sharded; cut the stages where the activation is whole",
                i, s.stages[i].first, across);
    }
    s.tensor = std::make_shared<const TensorGroup>(grid.tensor, options.allreduce);
    s.tensor_peers = s.world.split(s.tensor->rank(), s.world.rank());
    s.plan = std::move(tensor);
  }
  if (grid.data.size() > 1) {
    s.gradients = std::make_shared<DataParallel>(grid.data, DataParallelOptions{.algorithm = options.allreduce,
                                                                                .bucket_bytes = options.bucket_bytes,
                                                                                .overlap = options.overlap,
                                                                                .sharding = options.sharding});
    s.data = std::move(grid.data);
  }
  DDL_CHECK(options.sharding != Sharding::parameters,
            "Pipeline: sharding parameters (ZeRO stage 3) in a hybrid would gather each stage's parameters for every "
            "micro-batch's forward and backward, 2M allgathers a step instead of 2; shard the optimizer state or the "
            "gradients (DeepSpeed refuses stages 2 and 3 with a pipeline)");
  DDL_CHECK(options.sharding == Sharding::none || s.gradients,
            "Pipeline: sharding {} shards each stage's state over the pipelines that train it, and there is only one "
            "pipeline",
            sharding_name(options.sharding));
  s.chunks = chunks_per_rank(options.schedule, options.chunks);
  s.options.chunks = s.chunks;
  s.layout = chunk_layout(options.schedule);
  DDL_CHECK(s.chunks == 1 || (!s.gradients && !s.tensor),
            "Pipeline: the {} schedule's {} chunks per rank run in a single pipeline without tensor groups (not yet "
            "in a hybrid)",
            pipeline_schedule_name(options.schedule), s.chunks);
  DDL_CHECK(static_cast<int>(s.stages.size()) == s.comm.size() * s.chunks,
            "Pipeline: {} stages for {} ranks; a pipeline takes one rank per stage{}", s.stages.size(), s.comm.size(),
            s.chunks == 1 ? std::string()
                          : fmt::format(" and chunk, {} chunks per rank under the {} schedule: {} stages", s.chunks,
                                        pipeline_schedule_name(options.schedule), s.comm.size() * s.chunks));
  s.options.micro_batches = micro_batches(options, s.comm.size());
  DDL_CHECK(options.micro_batches >= 0 && s.options.micro_batches * s.chunks <= kMaxMicroBatches,
            "Pipeline: micro_batches = {} is invalid (1 to {}, or 0 for {} per stage)", options.micro_batches,
            kMaxMicroBatches / s.chunks, kMicroBatchesPerStage);
  s.weights = weight_gradients_of(options);
  for (std::size_t i = 0; i < s.stages.size(); ++i) {
    const std::size_t expected_first = i == 0 ? 0 : s.stages[i - 1].last + 1;
    DDL_CHECK(s.stages[i].first == expected_first && s.stages[i].last >= s.stages[i].first,
              "Pipeline: stage {} holds layers {}-{}; stages must be non-empty and follow each other from layer 0 "
              "(expected it to start at layer {})",
              i, s.stages[i].first, s.stages[i].last, expected_first);
  }
}

Pipeline::~Pipeline() = default;

int Pipeline::stage() const { return state_->stage; }
int Pipeline::stage_count() const { return state_->ranks(); }
int Pipeline::chunks() const { return state_->chunks; }
std::vector<StageRange> Pipeline::layers() const { return state_->ranges_of(state_->stage); }
std::vector<StageRange> Pipeline::layers_of(int stage) const { return state_->ranges_of(stage); }
const std::vector<StageRange>& Pipeline::stages() const { return state_->stages; }
const PipelineOptions& Pipeline::options() const { return state_->options; }
const Communicator& Pipeline::communicator() const { return state_->comm; }
bool Pipeline::over_nccl() const { return state_->links && state_->links->over_nccl(); }
PipelineStatistics Pipeline::statistics() const { return state_->statistics; }
int Pipeline::data_parallel() const { return state_->data ? state_->data->size() : 1; }

DataParallel& Pipeline::gradients() const {
  DDL_CHECK(state_->gradients != nullptr, "Pipeline: a single pipeline averages no gradients over pipelines");
  return *state_->gradients;
}

std::shared_ptr<const TensorGroup> Pipeline::tensor_group() const { return state_->tensor; }
const TensorPlan* Pipeline::tensor_plan() const { return state_->plan ? &*state_->plan : nullptr; }
std::int64_t Pipeline::tensor_bytes_sent() const { return state_->tensor_bytes; }

std::string Pipeline::describe(std::int64_t shard_batch) const {
  std::string text;
  if (data_parallel() > 1) {
    text = fmt::format("{} pipelines ({} allreduce, {} per pipeline)", data_parallel(),
                       algorithm_name(state_->options.allreduce), shard_batch);
  }
  if (state_->tensor) {
    text += fmt::format("{}stages split over tensor groups of {} ranks ({})", text.empty() ? "" : ", ",
                        state_->tensor->size(), state_->plan->describe());
  }
  return text;
}
int Pipeline::rank() const { return state_->world.rank(); }
int Pipeline::world_size() const { return state_->world.size(); }
optim::Shard Pipeline::shard() const {
  return state_->data ? optim::Shard{state_->data->rank(), state_->data->size()} : optim::Shard{};
}

Device Pipeline::device(DeviceType type) {
  if (type != DeviceType::CUDA) return Strategy::device(type);
  return local_gpu(state_->world, "Pipeline", "a pipeline");
}

void Pipeline::prepare(layers::Module& model, optim::Optimizer* optimizer) {
  // A rank given the wrong model must not leave the others waiting for its
  // messages: every rank learns here whether all have theirs.
  const std::vector<StageRange> own = layers();
  std::vector<std::string> names;
  for (const StageRange& range : own) {
    for (std::size_t layer = range.first; layer <= range.last; ++layer) names.push_back(std::to_string(layer));
  }
  std::string problem;
  const auto* sequential = dynamic_cast<const layers::Sequential*>(&model);
  if (sequential == nullptr) {
    problem = fmt::format("Pipeline: stage {} was given a {}, not a Sequential", stage(), model.type_name());
  } else {
    bool fits = sequential->size() == names.size();
    for (std::size_t i = 0; fits && i < names.size(); ++i) fits = sequential->children()[i].first == names[i];
    if (!fits) {
      problem = fmt::format(
          "Pipeline: stage {} holds layers {} of the model, but its model has {} layers ({}-{} "
          "by name): build each stage's model with build_stage",
          stage(), format_ranges(own), sequential->size(),
          sequential->size() == 0 ? "" : sequential->children().front().first,
          sequential->size() == 0 ? "" : sequential->children().back().first);
    }
  }
  agree_all_can_proceed(state_->world, problem, "Pipeline: checking each stage's model");
  state_->chunked = nullptr;  // its chunks made anew (and set to recompute, when asked)
  state_->chunks_of(model);
  // Every pipeline starts from the first one's state (and its checkpoint).
  if (state_->gradients) state_->gradients->prepare(model, optimizer);
}

void Pipeline::begin_step(layers::Module& model) {
  if (state_->gradients) {
    state_->gradients->begin_step(model);
  } else {
    Strategy::begin_step(model);
  }
}

void Pipeline::synchronize_gradients(layers::Module& model) {
  if (state_->gradients) state_->gradients->synchronize_gradients(model);
}

optim::StepOutput Pipeline::forward_backward(layers::Module& model, const optim::LossFunction& loss,
                                             const optim::Batch& batch, const optim::StepShare& share) {
  State& s = *state_;
  const auto start = Clock::now();
  s.learn_shapes(model, batch);
  Generator& generator = default_generator();
  const std::uint64_t base = generator.offset();
  generator.set_state(generator.seed(), base + static_cast<std::uint64_t>(s.stage) * kGeneratorBlock);

  // The tensor group's bytes of the step's schedule (not of the probe above).
  const std::int64_t tensor_start = s.tensor ? s.tensor->communicator().bytes_sent() : 0;
  StageRun run(s, model, batch, true, loss);
  const std::vector<PipelineAction>& actions = s.actions(run.micro_batches());
  const PipelineAction* arm = final_accumulations(actions);
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& action = actions[i];
    if (s.gradients && share.last && &action == arm) s.gradients->expect_final_gradients();
    switch (action.kind) {
      case PipelineAction::Kind::Forward:
        run.forward(action.micro_batch, action.chunk);
        break;
      case PipelineAction::Kind::Backward:
        run.backward(action.micro_batch, action.chunk, share.loss_scale);
        break;
      case PipelineAction::Kind::Weight: {
        // Weights in a row at the batch's end: one product per weight over
        // their micro-batches. Per micro-batch, each its own product added
        // into .grad in micro-batch order: the same sums, bit for bit,
        // wherever the schedule puts them.
        std::vector<std::size_t> parts{run.slot(action.micro_batch, action.chunk)};
        while (s.weights == WeightGradients::at_batch_end && i + 1 < actions.size() &&
               actions[i + 1].kind == PipelineAction::Kind::Weight) {
          ++i;
          parts.push_back(run.slot(actions[i].micro_batch, actions[i].chunk));
        }
        run.weight_gradients(parts, action);
        break;
      }
    }
  }
  optim::StepOutput result = run.finish();
  if (s.tensor) s.tensor_bytes += s.tensor->communicator().bytes_sent() - tensor_start;

  generator.set_state(generator.seed(), base + static_cast<std::uint64_t>(stage_count()) * kGeneratorBlock);
  PipelineStatistics& statistics = s.statistics;
  const double seconds = seconds_since(start);
  if (statistics.steps == 0) {
    statistics.first_step_seconds = seconds;
    statistics.first_compute_seconds = run.compute_seconds();
  }
  ++statistics.steps;
  statistics.step_seconds += seconds;
  statistics.compute_seconds += run.compute_seconds();
  return result;
}

optim::StepOutput Pipeline::forward(layers::Module& model, const optim::Batch& batch, const optim::LossFunction& loss) {
  State& s = *state_;
  s.learn_shapes(model, batch);
  StageRun run(s, model, batch, false, loss);
  // Chunk by chunk, each over every micro-batch: a rank's chunks are in
  // model order, so every wait is on an earlier stage, and the ranks work
  // on a chunk's micro-batches while the next chunk's inputs travel.
  for (int chunk = 0; chunk < s.chunks; ++chunk) {
    for (int m = 0; m < run.micro_batches(); ++m) run.forward(m, chunk);
  }
  return run.finish();
}

void Pipeline::update(layers::Module& model, optim::Optimizer& optimizer) {
  if (state_->gradients) return state_->gradients->update(model, optimizer);
  Strategy::update(model, optimizer);
}

// A stage's state is first whole over its data-parallel group (sharded: it
// is gathered from the group's chunks), then joined from its tensor group's
// slices on tensor rank 0, then gathered from the stages of that rank's
// pipeline (the other tensor ranks' pipelines have no whole state to give).
void Pipeline::gather_state(const layers::Module& model, optim::TrainingState& state) {
  if (state_->gradients) state_->gradients->gather_state(model, state);
  if (state_->tensor) {
    gather_tensor_state(*state_->tensor, model, state);
    if (state_->tensor->rank() != 0) return;
  }
  gather_stage_state(state_->comm, model, state_->stages.back().last + 1, state);
}

void Pipeline::select_state(const layers::Module& model, optim::TrainingState& state) {
  select_stage_state(state_->comm, model, state_->stages.back().last + 1, state);
  if (state_->tensor) select_tensor_state(*state_->tensor, model, state);
  if (state_->gradients) state_->gradients->select_state(model, state);
}

void Pipeline::sum_over_ranks(std::vector<double>& values) {
  if (!state_->tensor) return state_->world.sum_doubles(values);
  // A tensor group's ranks hold the same metrics, so only tensor rank 0's
  // count; an agreement may hold a value on the root alone, which is one.
  state_->tensor_peers->sum_doubles(values);
  state_->tensor->communicator().broadcast_bytes(std::as_writable_bytes(std::span(values)), 0);
}

void Pipeline::agree_on_step(std::vector<double>& flags) {
  if (state_->data || state_->tensor) return sum_over_ranks(flags);
  state_->world.broadcast_bytes(std::as_writable_bytes(std::span(flags)), 0);
}

std::shared_ptr<layers::Sequential> build_stage(const layers::LayerList& layers, const Pipeline& pipeline,
                                                Generator* generator) {
  DDL_CHECK(pipeline.stages().back().last + 1 == layers.size(),
            "build_stage: the pipeline's stages cover layers 0-{}, but the model has {} layers (0-{})",
            pipeline.stages().back().last, layers.size(), layers.size() - 1);
  const std::vector<StageRange> own = pipeline.layers();
  if (const TensorPlan* plan = pipeline.tensor_plan()) {
    return build_tensor_parallel(layers, *plan, pipeline.tensor_group(), generator, own.front().first,
                                 own.front().last);
  }
  if (own.size() == 1) return layers.build(generator, own.front().first, own.front().last);
  // Several chunks: their layers in one Sequential, each named by its index
  // in the whole model, the layers between them built for their draws only
  // (as LayerList::build does those before its first).
  auto model = std::make_shared<layers::Sequential>();
  for (std::size_t i = 0, chunk = 0; chunk < own.size(); ++i) {
    auto layer = layers.build_layer(i, generator);
    if (i < own[chunk].first) continue;
    model->add(std::to_string(i), std::move(layer));
    if (i == own[chunk].last) ++chunk;
  }
  return model;
}

}  // namespace ddl::parallel
