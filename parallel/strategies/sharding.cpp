// Sharded data parallelism's state (see sharding.hpp).
#include <ddl/parallel/strategies/sharding.hpp>

#include <algorithm>
#include <map>

#include <ddl/core/allocator.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/reserved_memory.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/parallel/choice_by_name.hpp>

namespace ddl::parallel {

std::string_view sharding_name(Sharding sharding) {
  switch (sharding) {
    case Sharding::none:
      return "none";
    case Sharding::optimizer:
      return "optimizer";
    case Sharding::gradients:
      return "gradients";
    case Sharding::parameters:
      return "parameters";
  }
  return "unknown";
}

const std::vector<Sharding>& all_shardings() {
  static const std::vector<Sharding> shardings{Sharding::none, Sharding::optimizer, Sharding::gradients,
                                               Sharding::parameters};
  return shardings;
}

Sharding parse_sharding(std::string_view name) {
  return choice_by_name(name, all_shardings(), sharding_name, "sharding");
}

StateBytes zero_formula(Sharding sharding, std::int64_t parameters, std::int64_t optimizer_buffers, int ranks) {
  const std::int64_t values = parameters * static_cast<std::int64_t>(sizeof(float));
  // A rank's chunks of a bucket hold at most ceil(n / N) elements; the
  // formula divides evenly.
  const auto shard = [&](std::int64_t bytes) { return bytes / ranks; };
  const std::int64_t optimizer = values * optimizer_buffers;
  switch (sharding) {
    case Sharding::none:
      return {values, values, optimizer};
    case Sharding::optimizer:
      return {values, values, shard(optimizer)};
    case Sharding::gradients:
      return {values, shard(values), shard(optimizer)};
    case Sharding::parameters:
      return {shard(values), shard(values), shard(optimizer)};
  }
  return {};
}

namespace {

// The one device every bucket's parameters lie on.
Device parameters_device(Sharding sharding, const std::vector<GradientBucket>& buckets) {
  const Device device =
      buckets.empty() || buckets.front().entries.empty() ? cpu() : buckets.front().entries.front().parameter.device();
  for (const GradientBucket& bucket : buckets) {
    for (const BucketEntry& entry : bucket.entries) {
      DDL_CHECK(entry.parameter.device() == device,
                "sharded data parallelism (sharding {}): parameter '{}' is on {} and '{}' on {}; sharding needs the "
                "model on one device",
                sharding_name(sharding), buckets.front().entries.front().name, device, entry.name,
                entry.parameter.device());
    }
  }
  return device;
}

}  // namespace

ShardedState::ShardedState(Sharding sharding, std::vector<GradientBucket>& buckets, Communicator comm,
                           AllreduceAlgorithm algorithm, bool prefetch, bool on_gpu)
    : sharding_(sharding),
      rank_(comm.rank()),
      ranks_(comm.size()),
      // A communicator of its own: stage 3 gathers on the training thread
      // while the communication thread reduce-scatters on DataParallel's,
      // and two collectives at once on one communicator would mix up
      // their messages.
      comm_(comm.split(0, comm.rank())),
      algorithm_(algorithm),
      device_(parameters_device(sharding, buckets)),
      buckets_(buckets) {
  const TensorOptions on_device{DType::Float32, device_, false};
  if (on_gpu) {
    nccl_ = NcclCommunicator::create(comm_, device_.index());
    // NCCL connects two ranks on their first message: here, as
    // DataParallel's communicator does, not in the middle of a step.
    allgather(*nccl_, zeros({ranks_}, on_device), algorithm_);
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const GradientBucket& bucket = buckets_[b];
    // Stages 2 and 3 make a bucket's buffer only while it is filled and
    // reduced (ensure_buffer), and none at set-up, where the model is whole.
    DDL_CHECK(!shards_gradients() || !bucket.buffer.defined(),
              "sharded data parallelism: bucket {}'s gradient buffer was made before its first gradient", b);
    for (std::size_t e = 0; e < bucket.entries.size(); ++e) where_[bucket.entries[e].parameter.impl().get()] = {b, e};
    // Stage 3 releases the parameters between uses and keeps their addresses.
    if (shards_parameters())
      reserved_.push_back(ReservedMemory::make(device_, static_cast<std::size_t>(bucket.size()) * sizeof(float)));
    const Tensor flat =
        shards_parameters() ? reserved_.back()->tensor(bucket.size()) : Tensor::empty({bucket.size()}, on_device);
    for (const BucketEntry& entry : bucket.entries) {
      entry.parameter.move_into(flat.flat_slice(entry.offset, entry.parameter.shape()));
    }
    // The parameters' old memory back to the system, bucket by bucket, so
    // the model exists twice over by one bucket at most.
    empty_cache();
    flat_parameters_.push_back(flat);
    const ChunkRange mine = chunk(flat_parameters_.size() - 1);
    chunk_gradients_.push_back(shards_gradients() ? zeros({mine.size()}, on_device) : Tensor());
    shard_parameters_.push_back(shards_parameters() ? flat.flat_slice(mine.begin, {mine.size()}).clone() : Tensor());
  }
  std::vector<std::int64_t> bytes;
  for (const Tensor& flat : flat_parameters_) bytes.push_back(static_cast<std::int64_t>(flat.nbytes()));
  gatherer_ = std::make_unique<BucketGatherer>(
      std::move(bytes), [this](std::size_t b) { gather_now(b); }, [this](std::size_t b) { reserved_[b]->release(); },
      prefetch && shards_parameters());
}

ChunkRange ShardedState::chunk(std::size_t b) const { return chunk_range(buckets_[b].size(), ranks_, rank_); }

std::int64_t ShardedState::at(const Slice& slice) const {
  return buckets_[slice.bucket].entries[slice.entry].offset + slice.range.begin;
}

void ShardedState::slice(optim::Optimizer& optimizer) {
  DDL_CHECK(!sliced_, "sharded data parallelism: the optimizer is sliced once, in prepare()");
  optimizer_index_.clear();
  for (const GradientBucket& bucket : buckets_) optimizer_index_.emplace_back(bucket.entries.size());
  buffer_names_ = optimizer.buffer_names();
  std::vector<Slice> slices;
  const std::vector<Tensor> values = optimizer.keep_slices([&](std::size_t k, const Tensor& param) {
    const auto found = where_.find(param.impl().get());
    DDL_CHECK(found != where_.end(),
              "sharded data parallelism: the optimizer's parameter {} ({}) is not one of the model's parameters; "
              "sharding needs an optimizer over the model's parameters",
              k, param.shape());
    const auto [b, e] = found->second;
    DDL_CHECK(!optimizer_index_[b][e], "sharded data parallelism: the optimizer holds parameter '{}' twice",
              buckets_[b].entries[e].name);
    optimizer_index_[b][e] = k;
    optimizer_parameters_ = k + 1;
    const BucketEntry& entry = buckets_[b].entries[e];
    const ChunkRange mine = chunk(b);
    const std::int64_t begin = std::max(mine.begin, entry.offset) - entry.offset;
    const std::int64_t end = std::min(mine.end, entry.offset + entry.parameter.numel()) - entry.offset;
    if (begin >= end) return std::vector<optim::ElementRange>{};
    slices.push_back({b, e, k, {begin, end}, Tensor(), Tensor()});
    return std::vector<optim::ElementRange>{{begin, end}};
  });
  for (std::size_t i = 0; i < slices.size(); ++i) {
    Slice& slice = slices[i];
    slice.values = values[i];
    const Shape shape{slice.range.end - slice.range.begin};
    const std::int64_t in_chunk = at(slice) - chunk(slice.bucket).begin;
    slice.gradient = shards_gradients() ? chunk_gradients_[slice.bucket].flat_slice(in_chunk, shape)
                                        : buckets_[slice.bucket].buffer.flat_slice(at(slice), shape);
    // Stage 3: the optimizer steps the persistent shard, not the gathered
    // parameters (whose memory comes and goes).
    if (shards_parameters()) slice.values.move_into(shard_parameters_[slice.bucket].flat_slice(in_chunk, shape));
  }
  slices_ = std::move(slices);
  sliced_ = true;
}

void ShardedState::reduced(std::size_t b) {
  GradientBucket& bucket = buckets_[b];
  if (!shards_gradients()) return;
  const ChunkRange mine = chunk(b);
  chunk_gradients_[b].copy_from(bucket.buffer.flat_slice(mine.begin, {mine.size()}));
  release_buffer(bucket);
  const std::lock_guard lock(live_mutex_);
  --live_buckets_;
}

void ShardedState::ensure_buffer(std::size_t b) {
  GradientBucket& bucket = buckets_[b];
  if (!shards_gradients() || bucket.buffer.defined()) return;
  allocate_buffer(bucket, device_);
  for (const BucketEntry& entry : bucket.entries) {
    if (!entry.parameter.grad().defined()) entry.parameter.set_grad(entry.view);
  }
  const std::lock_guard lock(live_mutex_);
  peak_live_buckets_ = std::max(peak_live_buckets_, ++live_buckets_);
}

int ShardedState::peak_live_buckets() const {
  const std::lock_guard lock(live_mutex_);
  return peak_live_buckets_;
}

void ShardedState::step(optim::Optimizer& optimizer) {
  for (const Slice& slice : slices_) slice.values.set_grad(slice.gradient);
  optimizer.step();
  // Stage 3 gathers each bucket when a layer next needs it.
  if (shards_parameters()) return;
  for (std::size_t b = 0; b < flat_parameters_.size(); ++b) allgather_flat(b);
}

void ShardedState::allgather_flat(std::size_t b) const {
  timeline::Span span("communication", "allgather");
  if (span.active()) span.arg("bucket", static_cast<std::int64_t>(b)).arg("bytes", flat_parameters_[b].nbytes());
  const Tensor& flat = flat_parameters_[b];
  if (nccl_) return allgather(*nccl_, flat, algorithm_);
  allgather(comm_, flat, algorithm_);
}

void ShardedState::gather_now(std::size_t b) {
  reserved_[b]->commit();
  const ChunkRange mine = chunk(b);
  flat_parameters_[b].flat_slice(mine.begin, {mine.size()}).copy_from(shard_parameters_[b]);
  allgather_flat(b);
}

void ShardedState::gather(std::size_t b) {
  if (written_) reshard();
  gatherer_->gather(b);
}

void ShardedState::expect_written_parameters() {
  if (!shards_parameters()) return;
  if (written_) reshard();
  gatherer_->measure_peaks(false);
  for (std::size_t b = 0; b < buckets_.size(); ++b) gather(b);
  gatherer_->measure_peaks(true);
  written_ = true;
}
void ShardedState::prefetch(std::size_t b) { gatherer_->prefetch(b); }
void ShardedState::release(std::size_t b) { gatherer_->release(b); }
bool ShardedState::gathered(std::size_t b) const { return gatherer_->whole(b); }

void ShardedState::release_all() {
  for (std::size_t b = 0; b < buckets_.size(); ++b) release(b);
}

void ShardedState::reshard() {
  if (!shards_parameters()) return;
  written_ = false;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const ChunkRange mine = chunk(b);
    shard_parameters_[b].copy_from(flat_parameters_[b].flat_slice(mine.begin, {mine.size()}));
    gatherer_->mark_whole(b);  // whatever it was: the parameters were written
    release(b);
  }
}

void ShardedState::gather_model_state(std::vector<std::pair<std::string, Tensor>>& model) {
  if (!shards_parameters()) return;
  if (written_) reshard();
  std::map<const TensorImpl*, std::size_t> index;
  for (std::size_t i = 0; i < model.size(); ++i) index[model[i].second.impl().get()] = i;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const bool was_gathered = gathered(b);
    gather(b);
    for (const BucketEntry& entry : buckets_[b].entries) {
      const auto found = index.find(entry.parameter.impl().get());
      if (found != index.end()) model[found->second].second = entry.parameter.detach().clone();
    }
    if (!was_gathered) release(b);
  }
}

std::optional<std::size_t> ShardedState::bucket_of(const Tensor& parameter) const {
  const auto found = where_.find(parameter.impl().get());
  if (found == where_.end()) return std::nullopt;
  return found->second.first;
}

int ShardedState::peak_gathered_groups() const { return gatherer_->peak_whole(); }
std::int64_t ShardedState::peak_gathered_bytes() const { return gatherer_->peak_bytes(); }
std::int64_t ShardedState::prefetch_hits() const { return gatherer_->prefetch_hits(); }

namespace {

const Tensor& step_entry(const std::map<std::string, Tensor>& state) {
  const auto step = state.find("step");
  DDL_CHECK(step != state.end(), "sharded data parallelism: the optimizer's state has no 'step' entry");
  return step->second;
}

}  // namespace

void ShardedState::gather_optimizer_state(std::vector<std::pair<std::string, Tensor>>& state) const {
  const std::map<std::string, Tensor> mine(state.begin(), state.end());
  // whole[k][buffer]: parameter k's state, as the unsliced optimizer held it.
  std::vector<std::vector<Tensor>> whole(optimizer_parameters_, std::vector<Tensor>(buffer_names_.size()));
  for (std::size_t buffer = 0; buffer < buffer_names_.size(); ++buffer) {
    // Bucket by bucket, the state laid out as the bucket's parameters are;
    // each rank fills its chunk and the allgather the rest.
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const Tensor flat = zeros({buckets_[b].size()});
      for (std::size_t i = 0; i < slices_.size(); ++i) {
        if (slices_[i].bucket != b) continue;
        const Tensor& values = mine.at(std::to_string(i) + "." + buffer_names_[buffer]);
        flat.flat_slice(at(slices_[i]), values.shape()).copy_from(values);
      }
      allgather(comm_, std::span<float>(flat.data<float>(), static_cast<std::size_t>(flat.numel())), algorithm_);
      for (std::size_t e = 0; e < buckets_[b].entries.size(); ++e) {
        const BucketEntry& entry = buckets_[b].entries[e];
        if (const auto k = optimizer_index_[b][e])
          whole[*k][buffer] = flat.flat_slice(entry.offset, entry.parameter.shape());
      }
    }
  }
  std::vector<std::pair<std::string, Tensor>> gathered{{"step", step_entry(mine)}};
  for (std::size_t k = 0; k < optimizer_parameters_; ++k) {
    for (std::size_t buffer = 0; buffer < buffer_names_.size(); ++buffer) {
      gathered.emplace_back(std::to_string(k) + "." + buffer_names_[buffer], whole[k][buffer]);
    }
  }
  state = std::move(gathered);
}

void ShardedState::select_optimizer_state(std::vector<std::pair<std::string, Tensor>>& state) const {
  const std::map<std::string, Tensor> whole(state.begin(), state.end());
  // Every entry must be one a single process's optimizer would hold.
  std::map<std::string, Shape> expected{{"step", Shape{1}}};
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (std::size_t e = 0; e < buckets_[b].entries.size(); ++e) {
      if (const auto k = optimizer_index_[b][e]) {
        for (const std::string& buffer : buffer_names_)
          expected[std::to_string(*k) + "." + buffer] = buckets_[b].entries[e].parameter.shape();
      }
    }
  }
  for (const auto& [name, tensor] : whole) {
    const auto found = expected.find(name);
    DDL_CHECK(found != expected.end(),
              "sharded data parallelism: the optimizer state has an entry '{}' that a single process's optimizer of "
              "this model would not hold",
              name);
    DDL_CHECK(tensor.shape() == found->second,
              "sharded data parallelism: the optimizer state's entry '{}' has shape {}, "
              "but this model's parameter has shape {}",
              name, tensor.shape(), found->second);
  }
  std::vector<std::pair<std::string, Tensor>> selected{{"step", step_entry(whole)}};
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const Slice& slice = slices_[i];
    for (const std::string& buffer : buffer_names_) {
      const std::string name = std::to_string(slice.parameter) + "." + buffer;
      const auto found = whole.find(name);
      DDL_CHECK(found != whole.end(), "sharded data parallelism: the optimizer state has no entry '{}'", name);
      selected.emplace_back(std::to_string(i) + "." + buffer,
                            found->second.flat_slice(slice.range.begin, {slice.range.end - slice.range.begin}));
    }
  }
  state = std::move(selected);
}

StateBytes ShardedState::resident() const {
  StateBytes bytes;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Tensor& kept = shards_parameters() ? shard_parameters_[b] : flat_parameters_[b];
    bytes.parameters += static_cast<std::int64_t>(kept.nbytes());
    if (shards_parameters() && gathered(b)) bytes.parameters += static_cast<std::int64_t>(flat_parameters_[b].nbytes());
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Tensor& kept = shards_gradients() ? chunk_gradients_[b] : buckets_[b].buffer;
    if (kept.defined()) bytes.gradients += static_cast<std::int64_t>(kept.nbytes());
  }
  return bytes;
}

}  // namespace ddl::parallel
