// Optimizer: the base of SGD, Adadelta, Adagrad and Adam, which the one
// training engine steps. It holds parameter groups (each with its own learning
// rate), per-parameter state buffers on the parameter's device, and a step
// counter; state() / load_state() expose them by name for checkpoints, so a
// resumed run continues exactly as an uninterrupted one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::optim {

using NamedTensor = std::pair<std::string, Tensor>;

// A run of one parameter's elements, [begin, end) in row-major order.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

struct ParamGroup {
  std::vector<Tensor> params;
  double lr = 0.0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a .grad, in place (handles held by the
  // model share the data), then counts the step. Parameters without a
  // gradient are skipped and their state is left untouched; a step that
  // finds no gradient at all is not counted (Adam's bias correction counts
  // real updates only).
  virtual void step();
  // Drops every parameter's .grad (the next backward() writes a fresh one).
  void zero_grad();

  // The first group's learning rate; set_lr sets every group's (schedules).
  double lr() const;
  void set_lr(double lr);
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Adds a group with its own learning rate; its parameters get fresh state.
  void add_param_group(std::vector<Tensor> params, double lr);
  std::int64_t step_count() const { return step_count_; }
  const std::string& name() const { return name_; }
  // The per-parameter state each update needs, e.g. {"exp_avg", "exp_avg_sq"}.
  const std::vector<std::string>& buffer_names() const { return buffer_names_; }
  // The bytes of the state buffers made so far (state() would make the
  // rest), the step counter aside: what a memory report counts.
  std::int64_t state_bytes() const;

  // Sharded data parallelism (ZeRO stage 1): from now on the optimizer
  // holds state for, and steps, only the elements `ranges_of(k, param)`
  // names of each parameter k (over all groups, in order). Each range
  // becomes a 1-D parameter of its own, in its parameter's group, sharing
  // the parameter's memory; the state of its elements is kept and the rest
  // freed. The update is elementwise, so stepping the slices changes those
  // elements exactly as stepping the whole parameter would. Returns the
  // slices in order, which state() now numbers ("0.momentum" is the first
  // slice's) and whose .grad the caller sets before each step().
  std::vector<Tensor> keep_slices(
      const std::function<std::vector<ElementRange>(std::size_t k, const Tensor& param)>& ranges_of);

  // "step" (an int64 [1] tensor), then "<k>.<buffer>" for the k-th parameter
  // over all groups in order, e.g. "3.momentum". The buffers share the
  // optimizer's memory (clone them to keep a snapshot); "step" is a copy.
  std::vector<NamedTensor> state() const;
  // Copies values from `state` (as state() names them; any device). Throws
  // ddl::Error naming the entry if one is missing, unexpected, or of the wrong
  // shape or dtype, and then changes nothing.
  void load_state(const std::vector<NamedTensor>& state);

 protected:
  // `name` appears in error messages; `buffers` names the per-parameter state
  // each update needs, allocated like the parameter (on first use) and
  // filled with `initial`.
  Optimizer(std::string name, std::vector<Tensor> params, double lr, std::vector<std::string> buffers,
            double initial = 0.0);

  // One parameter's update: one kernel over its elements. `state` holds the
  // buffers in the order named at construction; step_count() is the number
  // of steps before this one.
  virtual void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state, double lr) = 0;

 private:
  void add_state_for(const std::vector<Tensor>& params);

  std::string name_;
  std::vector<ParamGroup> groups_;
  std::vector<std::string> buffer_names_;
  double initial_ = 0.0;
  // Parameter k's buffers, made (filled with `initial`) on first use: its
  // first update, state(), load_state; so an optimizer cut by keep_slices
  // before then never holds the whole state.
  std::vector<Tensor>& buffers_of(std::size_t k, const Tensor& param) const;

  // [parameter over all groups][buffer]; empty until buffers_of makes it.
  mutable std::vector<std::vector<Tensor>> state_;
  std::int64_t step_count_ = 0;
};

// Hyper-parameter checks shared by the optimizers: throw ddl::Error naming
// the optimizer, the hyper-parameter and its value.
namespace detail {
void check_hyper_parameter(bool ok, const std::string& optimizer, const char* what, double value,
                           const char* requirement);
}

}  // namespace ddl::optim
