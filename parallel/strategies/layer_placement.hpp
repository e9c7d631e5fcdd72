// LayerPlacement: the single-process strategy of a model whose layers are
// placed on several devices (placement.hpp). It trains as one process does;
// what it adds is the account of each device's memory at the end, measured
// by a StepMemoryMonitor it runs during fit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ddl/optim/engine/memory_monitor.hpp>
#include <ddl/optim/engine/strategy.hpp>

namespace ddl::parallel {

class LayerPlacement : public optim::Strategy {
 public:
  // A monitor of every device the model (a placed Sequential) uses.
  std::vector<std::shared_ptr<optim::Callback>> callbacks(const layers::Module& model) override;
  // Per device: its layers, parameter, optimizer-state and gradient bytes,
  // and the peak activation bytes of the training steps.
  std::string report(const layers::Module& model, const optim::Optimizer& optimizer) override;

 private:
  std::shared_ptr<optim::StepMemoryMonitor> memory_;
};

}  // namespace ddl::parallel
