#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/layers/module.hpp>

#include <fmt/ranges.h>

#include <algorithm>

namespace ddl::layers {
namespace {

void collect(const Module& module, const std::string& prefix, bool buffers, std::vector<NamedTensor>& out,
             const std::vector<NamedTensor>& own) {
  for (const auto& [name, tensor] : own) out.emplace_back(prefix + name, tensor);
  for (const auto& [name, child] : module.children()) {
    const auto child_own = buffers ? child->named_buffers() : child->named_parameters();
    for (const auto& [child_name, tensor] : child_own) out.emplace_back(prefix + name + "." + child_name, tensor);
  }
}

// Replaces the storage behind `tensor` (and its grad) by a copy on `device`,
// keeping the TensorImpl, so every handle to it follows.
void move_in_place(const Tensor& tensor, const Device& device) {
  if (tensor.device() == device) return;
  const NoGradGuard no_grad;
  TensorImpl& impl = *tensor.impl();
  impl.storage = tensor.detach().to(device).impl()->storage;
  if (impl.grad) impl.grad = Tensor(impl.grad).to(device).impl();
}

// The layout note of the parameter at dotted `path`, asked of the module
// that owns it.
std::string layout_at(const Module& module, const std::string& path) {
  const auto dot = path.find('.');
  if (dot != std::string::npos) {
    for (const auto& [name, child] : module.children()) {
      if (path.compare(0, dot, name) == 0 && name.size() == dot) return layout_at(*child, path.substr(dot + 1));
    }
  }
  return module.parameter_layout(path);
}

// How load_state_dict and set_parameter copy into `module`'s tensors.
CopyByNameOptions copy_options(const Module& module, bool strict, std::string sources_name) {
  CopyByNameOptions options{.strict = strict, .sources_name = std::move(sources_name)};
  options.layout_of = [&module](const std::string& path) { return layout_at(module, path); };
  return options;
}

}  // namespace

std::vector<NamedTensor> Module::named_parameters() const {
  std::vector<NamedTensor> out;
  collect(*this, "", false, out, parameters_);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

std::vector<NamedTensor> Module::named_buffers() const {
  std::vector<NamedTensor> out;
  collect(*this, "", true, out, buffers_);
  return out;
}

std::int64_t Module::parameter_count() const {
  std::int64_t count = 0;
  for (const auto& [name, tensor] : named_parameters()) count += tensor.numel();
  return count;
}

std::vector<NamedTensor> Module::state_dict() const {
  auto state = named_parameters();
  for (auto& buffer : named_buffers()) state.push_back(std::move(buffer));
  return state;
}

UnmatchedNames Module::load_state_dict(const std::vector<NamedTensor>& entries, bool strict) {
  return copy_by_name(type_name() + ": load_state_dict", state_dict(), entries,
                      copy_options(*this, strict, "the entries"));
}

void Module::set_parameter(const std::string& name, const Tensor& value) {
  const std::string context = type_name() + ": set_parameter";
  std::vector<NamedTensor> parameters = named_parameters();
  const auto found = std::find_if(parameters.begin(), parameters.end(),
                                  [&name](const NamedTensor& parameter) { return parameter.first == name; });
  if (found == parameters.end()) {
    std::vector<std::string> names;
    for (const auto& [known, tensor] : parameters) names.push_back(known);
    detail::fail("{}: no parameter '{}' (the parameters are: {})", context, name, fmt::join(names, ", "));
  }
  copy_by_name(context, {*found}, {{name, value}}, copy_options(*this, true, "the value"));
}

std::string Module::parameter_layout(const std::string& /*name*/) const { return {}; }

void Module::train(bool training) {
  training_ = training;
  for (auto& [name, child] : children_) child->train(training);
}

void Module::to(const Device& device) {
  check_device_exists(device);
  for (auto& [name, tensor] : parameters_) move_in_place(tensor, device);
  for (auto& [name, tensor] : buffers_) move_in_place(tensor, device);
  for (auto& [name, child] : children_) child->to(device);
}

void Module::zero_grad() {
  for (auto& [name, tensor] : named_parameters()) tensor.zero_grad();
}

Tensor Module::register_parameter(std::string name, Tensor value) {
  // No type_name() here: this runs inside derived constructors.
  DDL_CHECK(value.defined() && value.dtype() == DType::Float32, "parameter '{}' must be a float32 tensor", name);
  value.set_requires_grad(true);
  parameters_.emplace_back(std::move(name), value);
  return value;
}

Tensor Module::register_buffer(std::string name, Tensor value) {
  DDL_CHECK(value.defined(), "buffer '{}' is undefined", name);
  buffers_.emplace_back(std::move(name), value);
  return value;
}

}  // namespace ddl::layers
