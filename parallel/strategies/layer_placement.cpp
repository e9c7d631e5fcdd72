// LayerPlacement (see layer_placement.hpp).
#include <ddl/parallel/strategies/layer_placement.hpp>

#include <ddl/core/check.hpp>
#include <ddl/parallel/planning/placement.hpp>

namespace ddl::parallel {
namespace {

const layers::Sequential& placed(const layers::Module& model) {
  const auto* sequential = dynamic_cast<const layers::Sequential*>(&model);
  DDL_CHECK(sequential != nullptr, "LayerPlacement: places the layers of a Sequential, not of a {}", model.type_name());
  return *sequential;
}

}  // namespace

std::vector<std::shared_ptr<optim::Callback>> LayerPlacement::callbacks(const layers::Module& model) {
  if (!memory_) memory_ = std::make_shared<optim::StepMemoryMonitor>(placement_devices(placed(model)));
  return {memory_};
}

std::string LayerPlacement::report(const layers::Module& model, const optim::Optimizer& optimizer) {
  return "memory per device (peaks over the training steps):\n" +
         format_placement_report(placement_report(placed(model), &optimizer, memory_.get()));
}

}  // namespace ddl::parallel
