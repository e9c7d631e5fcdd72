#include <algorithm>
#include <charconv>
#include <optional>
#include <typeinfo>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/timeline.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/recompute.hpp>
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
  Tensor x = input;
  std::size_t next = 0;
  // Without the tape nothing is kept for backward: nothing to recompute.
  static const std::vector<LayerRange> none;
  const std::vector<LayerRange>& segments = grad_enabled() ? recomputed_ : none;
  for (const LayerRange& range : segments) {
    const std::size_t first = range.first,
                      last = range.second;  // not a structured binding: clang before 16 cannot capture one
    x = run_layers(next, first, x);  // those before the segment (none when next == first)
    const RecomputedSegment segment{
        .forward = [this, first, last](const Tensor& in) { return run_layers(first, last + 1, in); },
        .parameters = parameters_of(first, last),
        .buffers = buffers_of(modules_of(first, last))};
    x = layers::recompute(segment, x);
    next = last + 1;
  }
  x = run_layers(next, size(), x);
  return placement_.empty() ? x : x.to(output_device_);
}

bool Sequential::fusable_with_next(std::size_t i) const {
  if (i + 1 >= size()) return false;
  // Exactly these types: a subclass may override forward.
  const bool pair =
      typeid(*children()[i].second) == typeid(Conv2d) && typeid(*children()[i + 1].second) == typeid(ReLU);
  return pair && (placement_.empty() || placement_[i] == placement_[i + 1]);
}

bool Sequential::swappable_with_next(std::size_t i) const {
  if (i + 1 >= size()) return false;
  const bool pair =
      typeid(*children()[i].second) == typeid(ReLU) && typeid(*children()[i + 1].second) == typeid(MaxPool2d);
  // Windows that step by more than one pixel: fewer values after pooling.
  const bool shrinks = pair && static_cast<const MaxPool2d&>(*children()[i + 1].second).options().window_stride() > 1;
  return shrinks && (placement_.empty() || placement_[i] == placement_[i + 1]);
}

Tensor Sequential::run_layer(std::size_t i, const Tensor& x, bool fused_with_next) {
  const auto& [name, module] = children()[i];
  std::optional<timeline::Span> span;
  if (timeline::per_layer()) {
    span.emplace("compute", fused_with_next ? fmt::format("{}+{} Conv2d+ReLU", name, children()[i + 1].first)
                                            : fmt::format("{} {}", name, module->type_name()));
  }
  return fused_with_next ? static_cast<Conv2d&>(*module).forward_relu(x) : module->forward(x);
}

Tensor Sequential::run_layers(std::size_t first, std::size_t end, Tensor x) {
  // A pair with its second layer past `end` (split between two recomputed
  // segments) runs as two layers.
  const bool fusion = config::op_fusion();
  const auto swaps = [&](std::size_t i) { return fusion && i + 1 < end && swappable_with_next(i); };
  // Each boundary between devices is a differentiable copy: backward sends
  // the gradient back across it to the device that made the activation.
  for (std::size_t i = first; i < end; ++i) {
    const Tensor on_device = placement_.empty() ? x : x.to(placement_[i]);
    if (swaps(i)) {
      x = run_layer(i, run_layer(i + 1, on_device));  // max pooling first, then the ReLU
      ++i;
    } else if (fusion && i + 1 < end && fusable_with_next(i) && !swaps(i + 1)) {
      x = run_layer(i, on_device, /*fused_with_next=*/true);
      ++i;
    } else {
      x = run_layer(i, on_device);
    }
  }
  return x;
}

std::vector<const Module*> Sequential::modules_of(std::size_t first, std::size_t last) const {
  std::vector<const Module*> modules;
  for (std::size_t i = first; i <= last; ++i) modules.push_back(children()[i].second.get());
  return modules;
}

std::vector<Tensor> Sequential::parameters_of(std::size_t first, std::size_t last) const {
  std::vector<Tensor> parameters;
  for (const Module* module : modules_of(first, last)) {
    const std::vector<Tensor> own = module->parameters();
    parameters.insert(parameters.end(), own.begin(), own.end());
  }
  return parameters;
}

std::string Sequential::list_layers() const {
  std::vector<std::string> names;
  for (const auto& [name, child] : children()) names.push_back(fmt::format("{} ({})", name, child->type_name()));
  return fmt::format("{}", fmt::join(names, ", "));
}

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// A layer by the name it was added under, else by its index.
std::size_t layer_of(const Sequential& model, std::string_view token, std::string_view context) {
  const auto& children = model.children();
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i].first == token) return i;
  }
  std::size_t index = 0;
  const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), index);
  if (token.empty() || error != std::errc() || end != token.data() + token.size()) {
    detail::fail("{}: no layer is named '{}'; the model's {} layers are {}", context, token, children.size(),
                 model.list_layers());
  }
  DDL_CHECK(index < children.size(), "{}: layer {} is out of range: the model has {} layers (0-{})", context, index,
            children.size(), children.size() - 1);
  return index;
}

}  // namespace

Sequential::LayerRange Sequential::range_of(std::string_view text, std::string_view context) const {
  text = trim(text);
  // A whole name first: a layer's name may itself hold a '-'.
  for (const auto& [name, child] : children()) {
    if (name == text) {
      const std::size_t index = layer_of(*this, text, context);
      return {index, index};
    }
  }
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) {
    const std::size_t index = layer_of(*this, text, context);
    return {index, index};
  }
  const std::size_t first = layer_of(*this, trim(text.substr(0, dash)), context);
  const std::size_t last = layer_of(*this, trim(text.substr(dash + 1)), context);
  DDL_CHECK(first <= last, "{}: the range runs backwards (layer {} to layer {})", context, first, last);
  return {first, last};
}

namespace {

// Whether `module` or one inside it draws from a generator of its own,
// which a recomputing rerun cannot put back as it puts back the default one.
bool has_own_generator(const Module& module) {
  if (const auto* dropout = dynamic_cast<const Dropout*>(&module); dropout && dropout->generator() != nullptr) {
    return true;
  }
  return std::any_of(module.children().begin(), module.children().end(),
                     [](const auto& child) { return has_own_generator(*child.second); });
}

}  // namespace

void Sequential::recompute(std::vector<LayerRange> ranges) {
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const auto [first, last] = ranges[r];
    DDL_CHECK(first <= last && last < size(),
              "Sequential::recompute: the range {}-{} is not within the model's layers 0-{}", first, last,
              size() == 0 ? 0 : size() - 1);
    DDL_CHECK(
        r == 0 || first > ranges[r - 1].second,
        "Sequential::recompute: the range {}-{} does not come after the range {}-{} (ranges ascend and do not overlap)",
        first, last, ranges[r - 1].first, ranges[r - 1].second);
    for (std::size_t i = first; i <= last; ++i) {
      DDL_CHECK(!has_own_generator(*children()[i].second),
                "Sequential::recompute: layer {} ({}) draws from a generator of its own, which recomputing it "
                "would draw from anew (different dropout masks); give it none (the default generator's draws are "
                "replayed)",
                children()[i].first, children()[i].second->type_name());
    }
  }
  recomputed_ = std::move(ranges);
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
