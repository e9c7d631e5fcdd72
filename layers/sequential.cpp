#include <optional>

#include <ddl/core/check.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/layers/sequential.hpp>

namespace ddl::layers {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& module : modules) add(module);
}

Sequential& Sequential::add(std::shared_ptr<Module> module) { return add(std::to_string(size()), std::move(module)); }

Sequential& Sequential::add(std::string name, std::shared_ptr<Module> module) {
  DDL_CHECK(module != nullptr, "Sequential::add: module {} ('{}') is null", size(), name);
  DDL_CHECK(!name.empty() && name.find('.') == std::string::npos,
            "Sequential::add: module {} has the name '{}'; a name must be non-empty and hold no '.' (the "
            "separator of parameter names)",
            size(), name);
  for (const auto& [taken, child] : children()) {
    DDL_CHECK(taken != name, "Sequential::add: the name '{}' of module {} is already taken", name, size());
  }
  // A model placed before this add would leave the new child without a device.
  DDL_CHECK(placement_.empty(), "Sequential::add: the model is placed on devices; add modules before placing it");
  register_module(std::move(name), std::move(module));
  return *this;
}

Module& Sequential::operator[](std::size_t index) const {
  DDL_CHECK(index < size(), "Sequential: index {} is out of range for {} modules", index, size());
  return *children()[index].second;
}

Tensor Sequential::forward(const Tensor& input) {
  // Each boundary between devices is a differentiable copy: backward sends
  // the gradient back across it to the device that made the activation.
  Tensor x = input;
  for (std::size_t i = 0; i < size(); ++i) {
    const auto& [name, module] = children()[i];
    std::optional<timeline::Span> span;
    if (timeline::per_layer()) span.emplace("compute", fmt::format("{} {}", name, module->type_name()));
    x = module->forward(placement_.empty() ? x : x.to(placement_[i]));
  }
  return placement_.empty() ? x : x.to(output_device_);
}

void Sequential::place(std::vector<Device> devices, const Device& output) {
  DDL_CHECK(devices.size() == size(), "Sequential::place: {} devices for {} modules", devices.size(), size());
  check_device_exists(output);
  for (const Device& device : devices) check_device_exists(device);
  for (std::size_t i = 0; i < size(); ++i) children()[i].second->to(devices[i]);
  placement_ = std::move(devices);
  output_device_ = output;
}

void Sequential::to(const Device& device) {
  Module::to(device);
  placement_.clear();
  output_device_ = device;
}

}  // namespace ddl::layers
