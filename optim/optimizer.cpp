// Optimizer base: parameter groups, state buffers, the step counter and the
// named state a checkpoint stores.
#include <ddl/optim/optimizer.hpp>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>

#include <fmt/ranges.h>

#include <cmath>
#include <map>

namespace ddl::optim {

namespace detail {
void check_hyper_parameter(bool ok, const std::string& optimizer, const char* what, double value,
                           const char* requirement) {
  DDL_CHECK(ok, "{}: {} = {} is invalid ({})", optimizer, what, value, requirement);
}
}  // namespace detail

Optimizer::Optimizer(std::string name, std::vector<Tensor> params, double lr, std::vector<std::string> buffers,
                     double initial)
    : name_(std::move(name)), buffer_names_(std::move(buffers)), initial_(initial) {
  add_param_group(std::move(params), lr);
}

void Optimizer::add_param_group(std::vector<Tensor> params, double lr) {
  detail::check_hyper_parameter(std::isfinite(lr) && lr >= 0.0, name_, "lr", lr, "must be >= 0");
  for (std::size_t k = 0; k < params.size(); ++k) {
    DDL_CHECK(params[k].defined() && params[k].dtype() == DType::Float32,
              "{}: parameter {} of the new group is undefined or not float32", name_, k);
  }
  add_state_for(params);
  groups_.push_back({std::move(params), lr});
}

void Optimizer::add_state_for(const std::vector<Tensor>& params) {
  for (const Tensor& param : params) {
    std::vector<Tensor> buffers;
    const TensorOptions options{DType::Float32, param.device(), false};
    for (std::size_t b = 0; b < buffer_names_.size(); ++b) buffers.push_back(full(param.shape(), initial_, options));
    state_.push_back(std::move(buffers));
  }
}

void Optimizer::step() {
  std::size_t k = 0;
  bool updated = false;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) {
      std::vector<Tensor>& buffers = state_[k++];
      const Tensor grad = param.grad();
      if (!grad.defined()) continue;
      DDL_CHECK(grad.dtype() == DType::Float32 && grad.shape() == param.shape() && grad.device() == param.device(),
                "{}: parameter {} ({} on {}) has a gradient of {} {} on {}", name_, k - 1, param.shape(),
                param.device(), grad.dtype(), grad.shape(), grad.device());
      // The model may have been moved (Module::to) since the state was made.
      for (Tensor& buffer : buffers) {
        if (buffer.device() != param.device()) buffer = buffer.to(param.device());
      }
      update(param, grad, buffers, group.lr);
      updated = true;
    }
  }
  if (updated) ++step_count_;
}

void Optimizer::zero_grad() {
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) param.zero_grad();
  }
}

double Optimizer::lr() const { return groups_.front().lr; }

void Optimizer::set_lr(double lr) {
  detail::check_hyper_parameter(std::isfinite(lr) && lr >= 0.0, name_, "lr", lr, "must be >= 0");
  for (ParamGroup& group : groups_) group.lr = lr;
}

std::vector<NamedTensor> Optimizer::state() const {
  std::vector<NamedTensor> named;
  named.emplace_back("step", from_vector(std::vector<std::int64_t>{step_count_}, {1}));
  for (std::size_t k = 0; k < state_.size(); ++k) {
    for (std::size_t b = 0; b < buffer_names_.size(); ++b) {
      named.emplace_back(std::to_string(k) + "." + buffer_names_[b], state_[k][b]);
    }
  }
  return named;
}

void Optimizer::load_state(const std::vector<NamedTensor>& state) {
  const std::vector<NamedTensor> expected = this->state();
  std::map<std::string, const Tensor*> given;
  for (const auto& [entry_name, tensor] : state) {
    DDL_CHECK(given.emplace(entry_name, &tensor).second, "{}: load_state: entry '{}' appears twice", name_, entry_name);
  }
  // Check everything before changing anything, so a bad checkpoint leaves the
  // optimizer as it was.
  for (const auto& [entry_name, mine] : expected) {
    const auto found = given.find(entry_name);
    DDL_CHECK(found != given.end(), "{}: load_state: entry '{}' is missing", name_, entry_name);
    const Tensor& theirs = *found->second;
    DDL_CHECK(theirs.defined() && theirs.dtype() == mine.dtype() && theirs.shape() == mine.shape(),
              "{}: load_state: entry '{}' should be {} {} but is {}", name_, entry_name, mine.dtype(), mine.shape(),
              theirs.defined() ? fmt::format("{} {}", theirs.dtype(), theirs.shape()) : std::string("undefined"));
  }
  for (const auto& [entry_name, tensor] : state) {
    bool known = false;
    for (const auto& entry : expected) known = known || entry.first == entry_name;
    DDL_CHECK(known, "{}: load_state: unknown entry '{}' (this optimizer has {} parameters with buffers {})", name_,
              entry_name, state_.size(), fmt::join(buffer_names_, ", "));
  }
  for (const auto& [entry_name, mine] : expected) {
    const Tensor& theirs = *given.at(entry_name);
    if (entry_name == "step") {
      step_count_ = theirs.to_vector<std::int64_t>().at(0);
    } else {
      mine.copy_from(theirs);
    }
  }
}

}  // namespace ddl::optim
