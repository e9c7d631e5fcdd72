// Module: the base of every layer and model. A module owns named parameters
// (trained), buffers (state that is not trained, like batch-norm running
// statistics) and child modules, all in registration order, so
// named_parameters() is stable and the same on every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::layers {

using NamedTensor = std::pair<std::string, Tensor>;

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

  // Training mode (dropout active, batch statistics) or evaluation mode.
  void train(bool training = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer to `device` in place: tensors already
  // handed out (to an optimizer, say) see the move.
  void to(const Device& device);
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

}  // namespace ddl::layers
