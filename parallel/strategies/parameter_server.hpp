// ParameterServer: the strategy data parallelism had before allreduce (Li et
// al., OSDI 2014; DistBelief), kept to compare with it. The last `servers`
// ranks are servers; each owns a share of the parameters (balanced by size)
// and that share's optimizer state. The other ranks are workers: each
// computes gradients on its shard of the data, pushes each server the
// gradients of the parameters it owns, and pulls back the updated values.
//
//   synchronous: a server waits for every worker's push, averages them,
//     takes one optimizer step and sends the new values to every worker.
//     The same arithmetic as data-parallel allreduce (tested equal), but
//     all traffic funnels through the servers' links.
//   asynchronous: a server applies each push as it arrives (one optimizer
//     step per worker gradient, not averaged) and answers that worker at
//     once, so fast workers do not wait for slow ones. Staleness is bounded
//     (stale-synchronous parallel, Ho et al. 2013): a worker more than
//     `max_staleness` pushes ahead of the slowest gets its answer only when
//     the slowest catches up. Results depend on arrival order, so runs are
//     not reproducible bit for bit.
//
// Checkpoints are written by rank 0 (a worker): before it writes, each
// server sends it the optimizer state of the parameters it owns (rank 0's
// own optimizer never steps), and on
// resume prepare() hands rank 0's state to everyone, so a resumed run goes
// on with the servers' momentum and step count. The optimizer must hold the
// model's parameters in registration order (model->parameters()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <ddl/optim/engine/strategy.hpp>
#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::parallel {

struct ParameterServerOptions {
  int servers = 1;  // the last `servers` ranks; at least one rank must remain a worker
  bool asynchronous = false;
  int max_staleness = 4;  // asynchronous mode only
};

class ParameterServer : public optim::Strategy {
 public:
  explicit ParameterServer(Communicator comm, ParameterServerOptions options = {});
  ~ParameterServer() override;

  int rank() const override;
  int world_size() const override;
  // A worker's shard among the workers; a server steps as often as worker
  // 0, so its shard is worker 0's (counted, never read).
  optim::Shard shard() const override;
  void prepare(layers::Module& model, optim::Optimizer* optimizer) override;
  // Servers read no data: an empty batch per step of the workers.
  void begin_epoch(optim::BatchSource& data, std::int64_t epoch) override;
  std::optional<optim::Batch> next_batch(optim::BatchSource& data) override;
  // Servers compute nothing: no output, no loss, no gradient.
  optim::StepOutput forward_backward(layers::Module& model, const optim::LossFunction& loss, const optim::Batch& batch,
                                     const optim::StepShare& share) override;
  optim::StepOutput forward(layers::Module& model, const optim::Batch& batch, const optim::LossFunction& loss) override;
  // Workers push their gradients and pull the servers' new values (their
  // own optimizer is never stepped); servers step on the pushes.
  void update(layers::Module& model, optim::Optimizer& optimizer) override;
  void gather_state(const layers::Module& model, optim::TrainingState& state) override;
  void sum_over_ranks(std::vector<double>& values) override;
  // "synchronous parameter server: 3 worker(s) of 64 per step and 1 server(s)".
  std::string describe(std::int64_t shard_batch) const override;

  bool is_server() const;
  int worker_count() const;
  // Asynchronous servers: the most pushes any worker had made beyond the
  // slowest worker's when this server answered it, i.e. let it go on to
  // its next step. The bound says this never exceeds max_staleness; tests
  // read it to see that it holds and is reached. 0 on workers and in
  // synchronous mode.
  std::int64_t staleness_seen() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ddl::parallel
