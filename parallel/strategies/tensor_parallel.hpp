// TensorParallel: the strategy of a model whose layers are split over a
// tensor group (parallel/tensor/: the plan, the split layers, the two
// conjugate operators). Every rank of the group reads the same batches,
// runs the same layers on its slices and computes the same loss; the split
// layers' allreduces inside forward and backward are all the communication
// the group needs, and the parameters every rank holds whole get the same
// gradient on every rank, so the group steps alike with no gradient
// exchange. With several groups (replicas of the sliced model) a
// DataParallel over the data group (one rank per replica with the same
// slice) averages each slice's gradients, and each replica reads its shard
// of every epoch.
//
// The ranks are a ProcessGrid of one stage: world rank r = t + T d (t:
// tensor rank, d: data rank).
//
// Checkpoints hold the single-process format: each split entry joined from
// the group's slices on save, cut on load (tensor_state.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/process_grid.hpp>
#include <ddl/parallel/tensor/tensor_group.hpp>
#include <ddl/parallel/tensor/tensor_plan.hpp>

namespace ddl::parallel {

class TensorParallel : public optim::Strategy {
 public:
  // `grid` has one pipeline stage (ProcessGrid::split(world, replicas, 1,
  // T)); `plan` is the one this rank's model was built from
  // (build_tensor_parallel over `group`, a TensorGroup on grid.tensor); `data` averages the
  // gradients over grid.data when it holds several ranks (its sharding must
  // be none). The optimizer must hold the model's parameters in the
  // model's order (prepare() checks).
  TensorParallel(ProcessGrid grid, std::shared_ptr<const TensorGroup> group, TensorPlan plan,
                 DataParallelOptions data = {});

  int rank() const override;
  int world_size() const override;
  optim::Shard shard() const override;
  Device device(DeviceType type) override;
  void prepare(layers::Module& model, optim::Optimizer* optimizer) override;
  void begin_epoch(optim::BatchSource& data, std::int64_t epoch) override;
  void begin_step(layers::Module& model) override;
  optim::StepOutput forward_backward(layers::Module& model, const optim::LossFunction& loss, const optim::Batch& batch,
                                     const optim::StepShare& share) override;
  void synchronize_gradients(layers::Module& model) override;
  void gather_state(const layers::Module& model, optim::TrainingState& state) override;
  void select_state(const layers::Module& model, optim::TrainingState& state) override;
  // Over the replicas, then tensor rank 0's sums to the rest of its group:
  // a group's ranks compute the same metrics, but an agreement may hold a
  // value on the root alone.
  void sum_over_ranks(std::vector<double>& values) override;
  // The replicas' DataParallel's (its memory monitor), if any.
  std::vector<std::shared_ptr<optim::Callback>> callbacks(const layers::Module& model) override;
  // "tensor-parallel over 2 ranks (column 7 + row 10; ring allreduce)"
  std::string describe(std::int64_t shard_batch) const override;
  // Each rank's parameters (its slices and what it holds whole) and the
  // bytes its tensor group's allreduces sent per training step (a
  // collective).
  std::string report(const layers::Module& model, const optim::Optimizer& optimizer) override;

  const TensorGroup& group() const { return *group_; }
  const TensorPlan& plan() const { return plan_; }
  int replicas() const { return grid_.data.size(); }

 private:
  // The DataParallel over the replicas, or the single-process strategy.
  optim::Strategy& replicas_strategy();

  ProcessGrid grid_;
  std::shared_ptr<const TensorGroup> group_;
  TensorPlan plan_;
  std::optional<DataParallel> data_parallel_;
  optim::Strategy alone_;
  // Training steps so far, and what the tensor group's allreduces sent in
  // them (from begin_step to synchronize_gradients: not evaluation's).
  std::int64_t steps_ = 0, step_bytes_ = 0, step_start_bytes_ = 0;
};

}  // namespace ddl::parallel
