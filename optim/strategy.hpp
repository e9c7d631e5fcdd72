// Strategy: how the one training loop of Trainer is spread over devices and
// ranks (DESIGN.md: "parallelism is a strategy object plugged into it, never
// a second training loop"). The base class is the single-process strategy;
// data parallelism, the parameter server and pipelines override the hooks
// below, each of which the Trainer calls at a fixed point of every step.
#pragma once

#include <functional>
#include <vector>

#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>
#include <ddl/optim/batch_source.hpp>

namespace ddl::optim {

class Optimizer;

// The loss of a batch from the model's output and the batch's targets, e.g.
// layers::cross_entropy; it must return a scalar whose backward() fills the
// parameters' gradients.
using LossFunction = std::function<Tensor(const Tensor& output, const Tensor& target)>;

struct StepOutput {
  Tensor output;  // the model's output for the batch (for metrics); undefined
  Tensor loss;    // on ranks that compute none (parameter servers)
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  bool is_root() const { return rank() == 0; }
  // The part of every epoch this rank reads (data sharding); by default
  // rank r of world_size() ranks.
  virtual Shard shard() const { return {rank(), world_size()}; }
  // Whether this rank runs the model (a parameter server does not): ranks
  // that do not contribute no samples to evaluation and prediction.
  virtual bool computes() const { return true; }

  // Once before training starts, and after a checkpoint is loaded: make every
  // rank start from the same parameters, buffers and optimizer state (data
  // parallelism broadcasts rank 0's). `optimizer` is null for evaluation.
  virtual void prepare(layers::Module& model, Optimizer* optimizer);

  // Forward and backward of one training batch. A pipeline strategy
  // overrides it to schedule micro-batches over its stages.
  virtual StepOutput forward_backward(layers::Module& model, const LossFunction& loss, const Batch& batch);

  // After backward, before the optimizer step: data parallelism waits here
  // for its gradient buckets to be averaged over the ranks.
  virtual void synchronize_gradients(layers::Module& model);

  // After the optimizer step: the parameter server sends the updated
  // parameters back to the workers here.
  virtual void after_optimizer_step(layers::Module& model);

  // Before a checkpoint is written, on every rank (Trainer::save_checkpoint
  // is called on every rank; only rank 0 writes): a strategy whose
  // optimizer state lives on other ranks gathers it into rank 0's
  // `optimizer` here (the parameter server's servers do).
  virtual void before_checkpoint(Optimizer& optimizer);

  // Sums `values` element-wise over the ranks in place, so every rank
  // reports (and early-stops on) the same metrics.
  virtual void sum_over_ranks(std::vector<double>& values);
};

}  // namespace ddl::optim
