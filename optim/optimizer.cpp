// Optimizer base: parameter groups, state buffers, the step counter and the
// named state a checkpoint stores.
#include <ddl/optim/optimizer.hpp>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/named_tensors.hpp>

#include <fmt/ranges.h>

#include <cmath>

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

void Optimizer::add_state_for(const std::vector<Tensor>& params) { state_.resize(state_.size() + params.size()); }

std::vector<Tensor>& Optimizer::buffers_of(std::size_t k, const Tensor& param) const {
  std::vector<Tensor>& buffers = state_[k];
  if (buffers.size() < buffer_names_.size()) {
    const TensorOptions options{DType::Float32, param.device(), false};
    for (std::size_t b = 0; b < buffer_names_.size(); ++b) buffers.push_back(full(param.shape(), initial_, options));
  }
  return buffers;
}

void Optimizer::step() {
  std::size_t k = 0;
  bool updated = false;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) {
      const Tensor grad = param.grad();
      if (!grad.defined()) {
        ++k;
        continue;
      }
      std::vector<Tensor>& buffers = buffers_of(k++, param);
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

std::vector<Tensor> Optimizer::keep_slices(
    const std::function<std::vector<ElementRange>(std::size_t k, const Tensor& param)>& ranges_of) {
  std::vector<Tensor> slices;
  std::vector<std::vector<Tensor>> sliced_state;
  std::size_t k = 0;
  for (ParamGroup& group : groups_) {
    std::vector<Tensor> group_slices;
    for (const Tensor& param : group.params) {
      for (const ElementRange& range : ranges_of(k, param)) {
        DDL_CHECK(0 <= range.begin && range.begin < range.end && range.end <= param.numel(),
                  "{}: keep_slices: elements [{}, {}) are not a non-empty part of parameter {} ({} elements)", name_,
                  range.begin, range.end, k, param.numel());
        const Shape shape{range.end - range.begin};
        group_slices.push_back(param.detach().flat_slice(range.begin, shape));
        // State not made yet stays so, and is made for the slice alone.
        std::vector<Tensor> buffers;
        for (const Tensor& buffer : state_[k]) buffers.push_back(buffer.flat_slice(range.begin, shape).clone());
        sliced_state.push_back(std::move(buffers));
      }
      ++k;
    }
    slices.insert(slices.end(), group_slices.begin(), group_slices.end());
    group.params = std::move(group_slices);
  }
  state_ = std::move(sliced_state);
  return slices;
}

std::int64_t Optimizer::state_bytes() const {
  std::int64_t bytes = 0;
  for (const std::vector<Tensor>& buffers : state_) {
    for (const Tensor& buffer : buffers) bytes += static_cast<std::int64_t>(buffer.nbytes());
  }
  return bytes;
}

double Optimizer::lr() const { return groups_.front().lr; }

void Optimizer::set_lr(double lr) {
  detail::check_hyper_parameter(std::isfinite(lr) && lr >= 0.0, name_, "lr", lr, "must be >= 0");
  for (ParamGroup& group : groups_) group.lr = lr;
}

std::vector<NamedTensor> Optimizer::state() const {
  std::vector<NamedTensor> named;
  named.emplace_back("step", from_vector(std::vector<std::int64_t>{step_count_}, {1}));
  std::size_t k = 0;
  for (const ParamGroup& group : groups_) {
    for (const Tensor& param : group.params) {
      const std::vector<Tensor>& buffers = buffers_of(k, param);
      for (std::size_t b = 0; b < buffer_names_.size(); ++b) {
        named.emplace_back(std::to_string(k) + "." + buffer_names_[b], buffers[b]);
      }
      ++k;
    }
  }
  return named;
}

void Optimizer::load_state(const std::vector<NamedTensor>& state) {
  // copy_by_name checks every entry before it copies any, so a bad
  // checkpoint leaves the optimizer as it was. "step" lands in the fresh
  // tensor state() made for it and is read back from there.
  const std::vector<NamedTensor> mine = this->state();
  const std::string context =
      fmt::format("{}: load_state ({} parameters, buffers: {})", name_, state_.size(), fmt::join(buffer_names_, ", "));
  layers::copy_by_name(context, mine, state, {.sources_name = "the state"});
  step_count_ = mine.front().second.item<std::int64_t>();
}

}  // namespace ddl::optim
