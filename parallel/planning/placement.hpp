// Model parallelism inside one process: each layer of a Sequential runs on a
// device of its own, so a model whose parameters, optimizer state and
// activations do not fit one device is spread over several. A plan names a
// device for each layer; Sequential::place moves the layers, and its forward
// copies each activation across a device boundary with a differentiable copy,
// so backward sends the gradient back the same way and every gradient, and
// every optimizer buffer made after placing, lies on its parameter's device.
//
// The devices work one after another (layer i+1 waits for layer i); placement
// is about capacity, not speed. A pipeline (pipeline.hpp) keeps every stage
// busy with micro-batches.
//
//   auto model = models::make_model("mnist_cnn", &generator);
//   parallel::place(*model, parallel::parse_placement("0-6=cpu:0,7-10=cpu:1", *model), cpu(0));
//   auto optimizer = std::make_shared<optim::SGD>(model->parameters(), ...);  // after placing
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/optim/optimizer.hpp>

namespace ddl::parallel {

// The device of each child of a Sequential, in order.
struct PlacementPlan {
  std::vector<Device> devices;
};

// Parses "0-6=cpu:0,7-10=cpu:1": comma-separated RANGE=DEVICE groups, where
// RANGE is one layer or FIRST-LAST (inclusive), each given by index or by the
// name it was added under (Sequential::add(name, module)), and DEVICE is
// cpu:N or cuda:N. Every layer needs exactly one device. Throws ddl::Error
// naming what is wrong: a group that is not RANGE=DEVICE, an unknown layer
// name or index (listing the model's layers), a range that runs backwards, a
// layer placed twice or not at all, a device that does not exist.
PlacementPlan parse_placement(std::string_view text, const layers::Sequential& model);

// Places `model` as `plan` says (Sequential::place); its output is copied to
// `output`, the device of the loss and the targets. Create the optimizer
// after placing, so its state is made on each parameter's device.
void place(layers::Sequential& model, const PlacementPlan& plan, const Device& output);

// What one device holds. Activation and gradient bytes come from a
// StepMemoryMonitor that watched training, zero without one.
struct DeviceUsage {
  Device device;
  std::vector<std::size_t> layers;  // the children placed here
  std::size_t parameter_bytes = 0;
  std::size_t optimizer_bytes = 0;
  std::size_t gradient_bytes = 0;
  std::size_t peak_activation_bytes = 0;
};

// One row per device of the placement (and the output's device), in order
// of first use. `optimizer` and `measured` may be null.
std::vector<DeviceUsage> placement_report(const layers::Sequential& model, const optim::Optimizer* optimizer,
                                          const optim::StepMemoryMonitor* measured);

// The report as a table: device, layers, and the four sizes in MiB.
std::string format_placement_report(const std::vector<DeviceUsage>& usage);

// The devices of a placed model and its output's device, each once, in
// order of first use (those a StepMemoryMonitor should watch).
std::vector<Device> placement_devices(const layers::Sequential& model);

}  // namespace ddl::parallel
