// parallel::parse_placement on any text, against a model whose layer names
// are what makes a plan hard to read: a name holding '-' (like a range), a
// name that looks like a range ("1-2") and a number that names another
// layer than its index ("0" is layer 3). Four logical CPU devices exist, so
// cpu:0-3 are valid and cpu:4 is not. A plan it returns gives every layer a
// device, and written back as name=device groups parses to the same plan.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <ddl/layers/activation.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/parallel/planning/placement.hpp>

#include "support.hpp"

namespace {

const ddl::layers::Sequential& model() {
  using namespace ddl::layers;
  static const auto sequential = [] {
    auto s = std::make_shared<Sequential>();
    s->add("input-flatten", std::make_shared<Flatten>());
    s->add("1-2", std::make_shared<ReLU>());
    s->add(std::make_shared<Tanh>());  // "2"
    s->add("0", std::make_shared<ReLU>());
    s->add(std::make_shared<Sigmoid>());  // "4"
    return s;
  }();
  return *sequential;
}

std::string plan_text(const ddl::parallel::PlacementPlan& plan) {
  std::string text;
  for (std::size_t i = 0; i < plan.devices.size(); ++i) {
    if (i > 0) text += ',';
    text += model().children()[i].first + "=" + plan.devices[i].str();
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("DDL_CPU_DEVICES", "4", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddl;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  parallel::PlacementPlan plan;
  if (!fuzz::parses([&] { plan = parallel::parse_placement(text, model()); })) return 0;

  fuzz::require(plan.devices.size() == model().size(), "parse_placement: a device per layer");
  for (const Device& device : plan.devices) fuzz::require(device.is_cpu() && device.index() < 4, "an existing device");
  fuzz::require(parallel::parse_placement(plan_text(plan), model()).devices == plan.devices,
                "parse_placement(text(plan)) == plan");
  return 0;
}
