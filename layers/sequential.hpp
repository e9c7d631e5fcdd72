// Sequential: modules applied one after another, named "0", "1", ... in the
// order they were added, or by the names given (Keras' Sequential, PyTorch's
// nn.Sequential). Its children may run on different devices (place(): model
// parallelism inside one process, parallel/planning/placement.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends a module named by its index; returns *this so calls chain.
  Sequential& add(std::shared_ptr<Module> module);
  // Appends a module under `name` (not empty, no '.', not taken), as
  // PyTorch's nn.Sequential(OrderedDict): its parameters are "<name>.weight".
  Sequential& add(std::string name, std::shared_ptr<Module> module);
  template <class M, class... Args>
  Sequential& emplace(Args&&... args) {
    return add(std::make_shared<M>(std::forward<Args>(args)...));
  }

  std::size_t size() const { return children().size(); }
  Module& operator[](std::size_t index) const;

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sequential"; }

  // Runs child i on devices[i]: moves its parameters and buffers there, and
  // from then on forward copies each child's input to its device and the
  // last child's output to `output` (the device of the loss and targets).
  // The copies are differentiable, so gradients travel back the same way,
  // and each gradient arrives on its parameter's device. Use
  // parallel::place, which parses and checks a plan.
  void place(std::vector<Device> devices, const Device& output);
  // Each child's device (empty: not placed) and the output's device.
  const std::vector<Device>& placement() const { return placement_; }
  const Device& output_device() const { return output_device_; }
  // Moving the whole model to one device ends any placement.
  void to(const Device& device) override;

 private:
  std::vector<Device> placement_;
  Device output_device_;
};

}  // namespace ddl::layers
