// DataLoader: checks its dataset and options once, builds each epoch's shard
// order from the sampler, and gathers batches row by row on the host, on the
// caller's thread or on a BatchPrefetcher's.
#include <ddl/models/data/data_loader.hpp>

#include <algorithm>
#include <cstring>
#include <utility>

#include <ddl/core/check.hpp>
#include <ddl/models/data/batch_prefetcher.hpp>
#include <ddl/models/data/sampler.hpp>

namespace ddl::models {
namespace {

Shape sample_shape(const Shape& shape) {
  std::vector<std::int64_t> dims = shape.to_vector();
  dims.erase(dims.begin());
  return Shape(dims);
}

Shape batch_shape(const Shape& shape, std::int64_t batch) {
  std::vector<std::int64_t> dims = shape.to_vector();
  dims.front() = batch;
  return Shape(dims);
}

void check_shard(optim::Shard shard) {
  DDL_CHECK(shard.world >= 1 && shard.rank >= 0 && shard.rank < shard.world,
            "DataLoader: shard rank {} of world {} is invalid (need world >= 1 and 0 <= rank < world)", shard.rank,
            shard.world);
}

std::shared_ptr<const Sampler> pick_sampler(const DataLoaderOptions& options) {
  if (options.sampler) return options.sampler;
  if (options.shuffle) return std::make_shared<RandomSampler>(options.seed);
  return std::make_shared<SequentialSampler>();
}

}  // namespace

DataLoader::DataLoader(Dataset dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)), sampler_(pick_sampler(options_)) {
  const Tensor& inputs = dataset_.inputs;
  const Tensor& targets = dataset_.targets;
  DDL_CHECK(inputs.defined() && targets.defined(), "DataLoader: the dataset needs both inputs and targets");
  DDL_CHECK(inputs.dim() >= 1 && targets.dim() >= 1,
            "DataLoader: inputs {} and targets {} need a first dim that indexes the samples", inputs.shape(),
            targets.shape());
  DDL_CHECK(inputs.size(0) == targets.size(0),
            "DataLoader: inputs {} and targets {} disagree on the number of samples ({} vs {})", inputs.shape(),
            targets.shape(), inputs.size(0), targets.size(0));
  DDL_CHECK(inputs.dtype() == DType::Float32, "DataLoader: inputs must be float32, got {}", inputs.dtype());
  DDL_CHECK(inputs.device().is_cpu() && targets.device().is_cpu(),
            "DataLoader: the dataset must be on the host, but inputs are on {} and targets on {}", inputs.device(),
            targets.device());
  DDL_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got {}", options_.batch_size);
  DDL_CHECK(options_.prefetch >= 0, "DataLoader: prefetch must be >= 0, got {}", options_.prefetch);
  check_device_exists(options_.device);
  if (options_.normalization) {
    normalization_ = broadcast_to_sample(*options_.normalization, sample_shape(inputs.shape()));
  }
  epoch_length_ = static_cast<std::int64_t>(epoch_order(0).size());
}

DataLoader::~DataLoader() = default;

std::vector<std::int64_t> DataLoader::epoch_order(std::int64_t epoch) const {
  const std::int64_t n = dataset_.size();
  std::vector<std::int64_t> order = sampler_->indices(n, epoch);
  DDL_CHECK(epoch == 0 || static_cast<std::int64_t>(order.size()) == epoch_length_,
            "DataLoader: the sampler gave {} indices for epoch {} but {} for epoch 0; the length must not change",
            order.size(), epoch, epoch_length_);
  for (const std::int64_t index : order) {
    DDL_CHECK(index >= 0 && index < n, "DataLoader: the sampler gave index {} for epoch {}, outside [0, {})", index,
              epoch, n);
  }
  return order;
}

std::int64_t DataLoader::samples_per_epoch(optim::Shard shard) const {
  check_shard(shard);
  return (epoch_length_ + shard.world - 1) / shard.world;
}

std::int64_t DataLoader::batches_per_epoch(optim::Shard shard) const {
  const std::int64_t samples = samples_per_epoch(shard);
  const std::int64_t batch = options_.batch_size;
  return options_.drop_last ? samples / batch : (samples + batch - 1) / batch;
}

void DataLoader::begin_epoch(std::int64_t epoch, optim::Shard shard) {
  DDL_CHECK(epoch >= 0, "DataLoader: epoch must be >= 0, got {}", epoch);
  const std::int64_t samples = samples_per_epoch(shard);
  prefetcher_.reset();
  epoch_started_ = false;

  // Position p of the order padded by wrapping around is order[p % length].
  const std::vector<std::int64_t> order = epoch_order(epoch);
  auto shard_order = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(samples));
  for (std::int64_t i = 0; i < samples; ++i) {
    const std::int64_t position = shard.rank + i * shard.world;
    (*shard_order)[static_cast<std::size_t>(i)] = order[static_cast<std::size_t>(position % epoch_length_)];
  }
  shard_order_ = std::move(shard_order);
  // Positions rank + i * world below the epoch's length are samples of
  // their own; the ones past it wrapped around (padding).
  shard_samples_ = (epoch_length_ - shard.rank + shard.world - 1) / shard.world;
  batch_count_ = batches_per_epoch(shard);
  next_batch_ = 0;
  if (options_.prefetch > 0 && batch_count_ > 0) {
    prefetcher_ = std::make_unique<BatchPrefetcher>(
        [this, order = shard_order_](std::int64_t k) { return gather(*order, k); }, batch_count_, options_.prefetch);
  }
  epoch_started_ = true;
}

std::optional<optim::Batch> DataLoader::next() {
  DDL_CHECK(epoch_started_, "DataLoader::next: no epoch has begun; call begin_epoch first");
  std::optional<optim::Batch> batch;
  if (prefetcher_) {
    batch = prefetcher_->next();
  } else if (next_batch_ < batch_count_) {
    batch = gather(*shard_order_, next_batch_++);
  }
  if (batch) {
    batch->inputs = batch->inputs.to(options_.device);
    batch->targets = batch->targets.to(options_.device);
  }
  return batch;
}

optim::Batch DataLoader::gather(const std::vector<std::int64_t>& order, std::int64_t k) const {
  const Tensor& inputs = dataset_.inputs;
  const Tensor& targets = dataset_.targets;
  const std::int64_t begin = k * options_.batch_size;
  const std::int64_t count = std::min(options_.batch_size, static_cast<std::int64_t>(order.size()) - begin);
  optim::Batch batch{Tensor::empty(batch_shape(inputs.shape(), count), {DType::Float32, inputs.device()}),
                     Tensor::empty(batch_shape(targets.shape(), count), {targets.dtype(), targets.device()}),
                     std::max<std::int64_t>(0, begin + count - shard_samples_)};

  const std::int64_t input_numel = sample_shape(inputs.shape()).numel();
  const std::size_t target_bytes =
      element_size(targets.dtype()) * static_cast<std::size_t>(sample_shape(targets.shape()).numel());
  const float* input_rows = inputs.data<float>();
  const auto* target_rows = static_cast<const std::byte*>(targets.raw_data());
  float* batch_inputs = batch.inputs.data<float>();
  auto* batch_targets = static_cast<std::byte*>(batch.targets.raw_data());
  for (std::int64_t j = 0; j < count; ++j) {
    const std::int64_t sample = order[static_cast<std::size_t>(begin + j)];
    const float* from = input_rows + sample * input_numel;
    float* to = batch_inputs + j * input_numel;
    if (normalization_) {
      const std::vector<float>& mean = normalization_->mean;
      const std::vector<float>& stddev = normalization_->stddev;
      for (std::int64_t e = 0; e < input_numel; ++e) {
        const auto i = static_cast<std::size_t>(e);
        to[e] = (from[e] - mean[i]) / stddev[i];
      }
    } else {
      std::memcpy(to, from, static_cast<std::size_t>(input_numel) * sizeof(float));
    }
    std::memcpy(batch_targets + static_cast<std::size_t>(j) * target_bytes,
                target_rows + static_cast<std::size_t>(sample) * target_bytes, target_bytes);
  }
  return batch;
}

}  // namespace ddl::models
