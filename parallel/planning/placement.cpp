// Placement plans, placing a Sequential, and what each device then holds (see
// placement.hpp).
#include <ddl/parallel/planning/placement.hpp>

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ddl/core/check.hpp>
#include <ddl/optim/engine/memory_monitor.hpp>

namespace ddl::parallel {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::string format_ranges(const std::vector<std::size_t>& indexes) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < indexes.size();) {
    std::size_t j = i;
    while (j + 1 < indexes.size() && indexes[j + 1] == indexes[j] + 1) ++j;
    parts.push_back(i == j ? fmt::format("{}", indexes[i]) : fmt::format("{}-{}", indexes[i], indexes[j]));
    i = j + 1;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

double mebibytes(std::size_t bytes) { return optim::mebibytes(static_cast<double>(bytes)); }

}  // namespace

PlacementPlan parse_placement(std::string_view text, const layers::Sequential& model) {
  DDL_CHECK(model.size() > 0, "placement '{}': the model has no layers", text);
  DDL_CHECK(!trim(text).empty(), "placement: the plan is empty; give RANGE=DEVICE groups such as 0-{}=cpu:0",
            model.size() - 1);
  std::vector<std::optional<Device>> devices(model.size());
  std::vector<std::string_view> placed_by(model.size());
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view group = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto equals = group.find('=');
    DDL_CHECK(equals != std::string_view::npos && equals > 0 && equals + 1 < group.size(),
              "placement: the group '{}' of '{}' is not RANGE=DEVICE (e.g. 0-6=cpu:0)", group, text);
    const auto [first, last] = model.range_of(trim(group.substr(0, equals)), fmt::format("placement '{}'", group));
    Device device;
    try {
      device = Device::parse(trim(group.substr(equals + 1)));
      check_device_exists(device);
    } catch (const Error& error) {
      detail::fail("placement '{}': {}", group, error.what());
    }
    for (std::size_t i = first; i <= last; ++i) {
      DDL_CHECK(!devices[i], "placement: layer {} is placed twice, by '{}' and by '{}'", i, placed_by[i], group);
      devices[i] = device;
      placed_by[i] = group;
    }
  }
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i]) missing.push_back(i);
  }
  DDL_CHECK(missing.empty(), "placement '{}': layer(s) {} have no device; every layer of the {} needs one", text,
            format_ranges(missing), model.size());
  PlacementPlan plan;
  for (const auto& device : devices) plan.devices.push_back(*device);
  return plan;
}

void place(layers::Sequential& model, const PlacementPlan& plan, const Device& output) {
  DDL_CHECK(plan.devices.size() == model.size(), "place: the plan has {} devices for a model of {} layers",
            plan.devices.size(), model.size());
  model.place(plan.devices, output);
}

std::vector<Device> placement_devices(const layers::Sequential& model) {
  std::vector<Device> devices;
  const auto add = [&devices](const Device& device) {
    if (std::find(devices.begin(), devices.end(), device) == devices.end()) devices.push_back(device);
  };
  for (const Device& device : model.placement()) add(device);
  add(model.output_device());
  return devices;
}

std::vector<DeviceUsage> placement_report(const layers::Sequential& model, const optim::Optimizer* optimizer,
                                          const optim::StepMemoryMonitor* measured) {
  std::vector<DeviceUsage> usage;
  for (const Device& device : placement_devices(model)) usage.push_back({device, {}, 0, 0, 0, 0});
  // A device outside the plan (a child moved after placing) gets a row too.
  const auto row = [&usage](const Device& device) -> DeviceUsage& {
    const auto found =
        std::find_if(usage.begin(), usage.end(), [&](const DeviceUsage& u) { return u.device == device; });
    if (found != usage.end()) return *found;
    return usage.emplace_back(DeviceUsage{device, {}, 0, 0, 0, 0});
  };
  for (std::size_t i = 0; i < model.placement().size(); ++i) row(model.placement()[i]).layers.push_back(i);
  for (const Tensor& param : model.parameters()) row(param.device()).parameter_bytes += param.nbytes();
  if (optimizer != nullptr) {
    for (const auto& [name, buffer] : optimizer->state()) {
      if (name != "step") row(buffer.device()).optimizer_bytes += buffer.nbytes();  // "step" is one counter
    }
  }
  if (measured != nullptr) {
    for (const optim::StepMemory& peak : measured->peaks()) {
      DeviceUsage& u = row(peak.device);
      u.gradient_bytes = peak.gradient_bytes;
      u.peak_activation_bytes = peak.peak_activation_bytes;
    }
  }
  return usage;
}

std::string format_placement_report(const std::vector<DeviceUsage>& usage) {
  std::string out = fmt::format("{:<8} {:<12} {:>12} {:>12} {:>12} {:>12}\n", "device", "layers", "params MiB",
                                "optim MiB", "grads MiB", "activ. MiB");
  for (const DeviceUsage& u : usage) {
    out += fmt::format("{:<8} {:<12} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f}\n", u.device.str(),
                       u.layers.empty() ? "(output)" : format_ranges(u.layers), mebibytes(u.parameter_bytes),
                       mebibytes(u.optimizer_bytes), mebibytes(u.gradient_bytes), mebibytes(u.peak_activation_bytes));
  }
  return out;
}

}  // namespace ddl::parallel
