// Sequential: modules applied one after another, named "0", "1", ... in the
// order they were added, or by the names given (Keras' Sequential, PyTorch's
// nn.Sequential). Its children may run on different devices (place(): model
// parallelism inside one process, parallel/planning/placement.hpp). A
// Conv2d followed by a ReLU runs as one op, conv2d_relu, and a ReLU
// followed by max pooling as max pooling and then the ReLU, unless
// config::op_fusion() is off (TensorFlow fuses the first pair the same way).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
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

  // Layers first..last (inclusive) of each range run as one recomputed
  // segment (recompute.hpp): forward keeps only the segment's input, and
  // backward runs its layers again to differentiate them; bit for bit the
  // same training. Ranges ascending and disjoint, within the layers;
  // anything else is a ddl::Error naming the range. Empty: none.
  using LayerRange = std::pair<std::size_t, std::size_t>;
  void recompute(std::vector<LayerRange> ranges);
  const std::vector<LayerRange>& recomputed() const { return recomputed_; }

  // The layers `text` names: FIRST-LAST or one layer, each by the name it
  // was added under or its index ("2-5"). Anything else is a ddl::Error
  // that starts with `context` and lists the layers.
  LayerRange range_of(std::string_view text, std::string_view context) const;
  // "0 (Conv2d), 1 (ReLU), ...": the layers, for messages.
  std::string list_layers() const;

  // Whether layer i, a Conv2d, and the ReLU at i + 1 run as one op
  // (conv2d_relu) while config::op_fusion() is on: where both are exactly
  // those types and on one device. forward() then runs them so, unless
  // they fall in two recomputed segments or the ReLU is swapped with a
  // max pooling after it (below). The pair gives the same bits as the two
  // layers apart (layers/conv2d.hpp says where not) and allocates one
  // output.
  bool fusable_with_next(std::size_t i) const;
  // Whether layer i, a ReLU, and the MaxPool2d at i + 1, whose windows step
  // by more than a pixel, run in the other order while config::op_fusion()
  // is on (and not split by recomputed segments): max pooling, then the
  // ReLU on its fewer outputs, and in backward ReLU's gradient over those
  // instead of over the larger input. The same values and gradients, bit
  // for bit: ReLU never lowers a value nor reorders two, so the larger of
  // two ReLU outputs is the ReLU of the larger input, a window's winner is
  // the same position wherever its maximum is positive, and where it is
  // not, both orders give the value +0 and every gradient 0; NaNs win
  // their windows either way and ReLU keeps them.
  bool swappable_with_next(std::size_t i) const;

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
  // Layers first..end-1 on x, each on its device when placed.
  Tensor run_layers(std::size_t first, std::size_t end, Tensor x);
  // Layer i alone, or the Conv2d at i with the ReLU after it fused
  // (fusable_with_next), in a span of its own in a per-layer timeline.
  Tensor run_layer(std::size_t i, const Tensor& x, bool fused_with_next = false);

  std::vector<const Module*> modules_of(std::size_t first, std::size_t last) const;
  std::vector<Tensor> parameters_of(std::size_t first, std::size_t last) const;

  std::vector<Device> placement_;
  Device output_device_;
  std::vector<LayerRange> recomputed_;
};

}  // namespace ddl::layers
