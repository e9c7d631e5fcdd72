// Module: the base of every layer and model. A module owns named parameters
// (trained), buffers (state that is not trained, like batch-norm running
// statistics) and child modules, all in registration order, so
// named_parameters() is stable and the same on every rank. state_dict() and
// load_state_dict() read and set all of them by name, as PyTorch's do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/tensor.hpp>
#include <ddl/layers/named_tensors.hpp>

namespace ddl::layers {

class Module {
 public:
  virtual ~Module() = default;

  virtual Tensor forward(const Tensor& input) = 0;
  Tensor operator()(const Tensor& input) { return forward(input); }

  // The layer's type ("Conv2d") and a one-line description with its options.
  virtual std::string type_name() const = 0;
  virtual std::string describe() const { return type_name(); }

  // Recursive, in registration order; names are dotted paths ("0.weight").
  std::vector<NamedTensor> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<NamedTensor> named_buffers() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  std::int64_t parameter_count() const;

  // The parameters, then the buffers, by dotted name: all a trained model
  // is. The tensors are shared, not copied (clone them for a snapshot).
  // Every buffer is included (PyTorch's non-persistent buffers are a gap).
  std::vector<NamedTensor> state_dict() const;

  // Copies each entry into the parameter or buffer of that name (as
  // state_dict() names them) in place, so an optimizer or anyone else
  // holding the tensors sees the new values; entries may be on any device.
  // Every entry is checked before anything changes; the first problem
  // throws ddl::Error naming it: a name given twice, a shape or dtype that
  // differs, and with `strict` a parameter or buffer without an entry
  // (missing) or an entry without one (unexpected). Not strict, those two
  // are returned instead.
  //
  // Entries must be laid out as this module lays them out. Dense's weight is
  // [in, out] (Keras's layout), the transpose of PyTorch's Linear.weight
  // [out, in]: transpose PyTorch weights first. A square Dense layer cannot
  // tell the two apart, so no check can catch a forgotten transpose there.
  UnmatchedNames load_state_dict(const std::vector<NamedTensor>& entries, bool strict = true);

  // Copies `value` into the parameter `name` (a dotted path, as in
  // named_parameters()) in place, with load_state_dict's checks; an unknown
  // name is an error listing the parameters.
  void set_parameter(const std::string& name, const Tensor& value);

  // How this module's own parameter `name` is laid out, for the messages of
  // load_state_dict and set_parameter ("Dense(5, 3) weight is [in, out] ...");
  // empty where the shape says enough.
  virtual std::string parameter_layout(const std::string& name) const;

  // Training mode (dropout active, batch statistics) or evaluation mode.
  void train(bool training = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer to `device` in place: tensors already
  // handed out (to an optimizer, say) see the move.
  virtual void to(const Device& device);
  void zero_grad();

 protected:
  // Registers a parameter (made to require grad) and returns it.
  Tensor register_parameter(std::string name, Tensor value);
  Tensor register_buffer(std::string name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    children_.emplace_back(std::move(name), module);
    return module;
  }

 private:
  std::vector<NamedTensor> parameters_;
  std::vector<NamedTensor> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Puts a module in evaluation mode for a scope and restores the mode it had
// after, also when an exception leaves the scope (evaluate, predict, tiled
// inference).
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& module) : module_(module), was_training_(module.is_training()) { module_.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace ddl::layers
