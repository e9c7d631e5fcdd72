// TensorParallel (see tensor_parallel.hpp).
#include <ddl/parallel/strategies/tensor_parallel.hpp>

#include <array>
#include <span>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/optim/optimizer.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/tensor/tensor_state.hpp>

namespace ddl::parallel {

TensorParallel::TensorParallel(ProcessGrid grid, std::shared_ptr<const TensorGroup> group, TensorPlan plan,
                               DataParallelOptions data)
    : grid_(std::move(grid)), group_(std::move(group)), plan_(std::move(plan)) {
  DDL_CHECK(grid_.pipeline.size() == 1,
            "TensorParallel: a grid of {} pipeline stages; a pipeline of tensor-parallel stages is a Pipeline's",
            grid_.pipeline.size());
  DDL_CHECK(group_->size() == grid_.tensor.size() && plan_.ranks == group_->size(),
            "TensorParallel: a tensor group of {} ranks and a plan for {} do not fit a grid of {} tensor ranks",
            group_->size(), plan_.ranks, grid_.tensor.size());
  DDL_CHECK(data.sharding == Sharding::none,
            "TensorParallel: sharding the replicas' state ({}) is not supported with tensor parallelism",
            sharding_name(data.sharding));
  if (grid_.data.size() > 1) data_parallel_.emplace(grid_.data, data);
}

optim::Strategy& TensorParallel::replicas_strategy() {
  if (data_parallel_) return *data_parallel_;
  return alone_;
}

int TensorParallel::rank() const { return grid_.world.rank(); }
int TensorParallel::world_size() const { return grid_.world.size(); }
optim::Shard TensorParallel::shard() const { return {grid_.data.rank(), grid_.data.size()}; }

Device TensorParallel::device(DeviceType type) {
  if (type != DeviceType::CUDA) return Strategy::device(type);
  return local_gpu(grid_.world, "TensorParallel", "tensor parallelism");
}

void TensorParallel::prepare(layers::Module& model, optim::Optimizer* optimizer) {
  // A rank given another model than its plan's must not leave the others
  // waiting in a split layer's allreduce: every rank learns here whether
  // all have theirs.
  std::string problem;
  const auto* sequential = dynamic_cast<const layers::Sequential*>(&model);
  if (sequential == nullptr) {
    problem = fmt::format("TensorParallel: rank {} was given a {}, not a Sequential", rank(), model.type_name());
  } else if (sequential->size() != plan_.layers) {
    problem = fmt::format(
        "TensorParallel: rank {}'s model has {} layers, its plan {}: build it with "
        "build_tensor_parallel",
        rank(), sequential->size(), plan_.layers);
  }
  // Checkpoints name the optimizer's state by the parameters' places in the
  // model ("<k>.<buffer>"), so the optimizer must hold them in that order.
  if (problem.empty() && optimizer != nullptr) {
    const std::vector<Tensor> parameters = model.parameters();
    std::size_t k = 0;
    bool same = true;
    for (const optim::ParamGroup& group : optimizer->param_groups()) {
      for (const Tensor& parameter : group.params)
        same = same && k < parameters.size() && parameter.same(parameters[k++]);
    }
    if (!same || k != parameters.size()) {
      problem = fmt::format(
          "TensorParallel: rank {}'s optimizer does not hold the model's {} parameters in the "
          "model's order (its checkpoints name the state by that order)",
          rank(), parameters.size());
    }
  }
  agree_all_can_proceed(grid_.world, problem, "TensorParallel: checking each rank's model");
  replicas_strategy().prepare(model, optimizer);
}

void TensorParallel::begin_epoch(optim::BatchSource& data, std::int64_t epoch) {
  replicas_strategy().begin_epoch(data, epoch);
}

void TensorParallel::begin_step(layers::Module& model) {
  step_start_bytes_ = grid_.tensor.bytes_sent();
  replicas_strategy().begin_step(model);
}

optim::StepOutput TensorParallel::forward_backward(layers::Module& model, const optim::LossFunction& loss,
                                                   const optim::Batch& batch, const optim::StepShare& share) {
  return replicas_strategy().forward_backward(model, loss, batch, share);
}

void TensorParallel::synchronize_gradients(layers::Module& model) {
  replicas_strategy().synchronize_gradients(model);
  step_bytes_ += grid_.tensor.bytes_sent() - step_start_bytes_;
  ++steps_;
}

void TensorParallel::gather_state(const layers::Module& model, optim::TrainingState& state) {
  replicas_strategy().gather_state(model, state);
  gather_tensor_state(*group_, model, state);
}

void TensorParallel::select_state(const layers::Module& model, optim::TrainingState& state) {
  select_tensor_state(*group_, model, state);
  replicas_strategy().select_state(model, state);
}

void TensorParallel::sum_over_ranks(std::vector<double>& values) {
  // A group's ranks compute the same metrics, so the replicas' sum counts
  // each once; the agreements summed here (a checkpoint the root failed to
  // write, sums only the root resumed) hold a value on one rank of a group
  // alone, so every rank takes tensor rank 0's column.
  replicas_strategy().sum_over_ranks(values);
  grid_.tensor.broadcast_bytes(std::as_writable_bytes(std::span(values)), 0);
}

std::vector<std::shared_ptr<optim::Callback>> TensorParallel::callbacks(const layers::Module& model) {
  return replicas_strategy().callbacks(model);
}

std::string TensorParallel::describe(std::int64_t shard_batch) const {
  std::string text = fmt::format("tensor-parallel over {} ranks ({}; {} allreduce)", group_->size(), plan_.describe(),
                                 algorithm_name(group_->algorithm()));
  if (data_parallel_) text += fmt::format(", {} replicas ({})", replicas(), data_parallel_->describe(shard_batch));
  return text;
}

std::string TensorParallel::report(const layers::Module& model, const optim::Optimizer& optimizer) {
  std::string text = data_parallel_ ? data_parallel_->report(model, optimizer) : std::string();
  // Each rank's row, gathered: its parameters and optimizer state (its
  // slices and what it holds whole), and what its tensor group's
  // allreduces sent per step (-1: MPI's or NCCL's own, uncounted).
  const TensorGroup& group = *group_;
  double parameters = 0.0;
  for (const Tensor& parameter : model.parameters()) parameters += static_cast<double>(parameter.nbytes());
  const bool counted = group.counted() && steps_ > 0;
  const double sent = counted ? static_cast<double>(step_bytes_) / static_cast<double>(steps_) : -1.0;
  const std::array<double, 4> mine{parameters, static_cast<double>(optimizer.state_bytes()),
                                   optim::peak_resident_bytes(), sent};
  const std::vector<double> rows = allgather_values(grid_.world, std::span<const double>(mine));
  text += fmt::format("tensor parallelism, per rank:\n{:<6} {:>7} {:>11} {:>10} {:>9} {:>14}\n", "rank", "tensor",
                      "params MiB", "optim MiB", "peak RSS", "sent/step MiB");
  for (std::size_t r = 0; r < rows.size() / mine.size(); ++r) {
    const double* row = rows.data() + r * mine.size();
    text +=
        fmt::format("{:<6} {:>7} {:>11.2f} {:>10.2f} {:>8.0f}M {:>14}\n", r, r % static_cast<std::size_t>(group.size()),
                    optim::mebibytes(row[0]), optim::mebibytes(row[1]), optim::mebibytes(row[2]),
                    row[3] < 0.0 ? std::string("-") : fmt::format("{:.2f}", optim::mebibytes(row[3])));
  }
  return text;
}

}  // namespace ddl::parallel
