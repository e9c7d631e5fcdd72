#include <ddl/core/autograd.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/sequential.hpp>
#include <ddl/layers/summary.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace ddl::layers {
namespace {

// "(None, 32, 26, 26)": the batch dim is shown as None, as Keras does.
std::string shape_text(const Shape& shape) {
  std::string text = "(None";
  for (int d = 1; d < shape.rank(); ++d) text += fmt::format(", {}", shape[d]);
  return text + ")";
}

std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::string summary(Module& model, const Shape& sample_shape) {
  std::vector<std::int64_t> dims{1};
  for (const std::int64_t d : sample_shape.to_vector()) dims.push_back(d);
  const std::vector<Tensor> parameters = model.parameters();
  const Device device = parameters.empty() ? cpu() : parameters.front().device();

  struct Row {
    std::string name, shape;
    std::int64_t params;
    std::string device;  // set for the children of a placed Sequential
  };
  std::vector<Row> rows;
  const bool was_training = model.is_training();
  model.eval();
  {
    const NoGradGuard no_grad;
    Tensor x = zeros(Shape(dims), {DType::Float32, device, false});
    // Only a Sequential feeds each child the previous child's output; any
    // other module (a Residual, say) is one row, run as a whole.
    const auto* sequential = dynamic_cast<const Sequential*>(&model);
    if (sequential == nullptr) {
      x = model.forward(x);
      rows.push_back({model.describe(), shape_text(x.shape()), model.parameter_count(), {}});
    } else {
      const std::vector<Device>& placement = sequential->placement();
      for (std::size_t i = 0; i < sequential->size(); ++i) {
        const auto& [name, child] = sequential->children()[i];
        if (!placement.empty()) x = x.to(placement[i]);
        x = child->forward(x);
        rows.push_back({fmt::format("{} ({})", name, child->describe()), shape_text(x.shape()),
                        child->parameter_count(), placement.empty() ? std::string() : placement[i].str()});
      }
    }
  }
  model.train(was_training);

  std::int64_t trainable = 0;
  for (const Tensor& p : parameters) trainable += p.numel();
  std::int64_t fixed = 0;
  for (const auto& [name, b] : model.named_buffers()) fixed += b.numel();

  // Columns as wide as their longest entry, so long layer descriptions
  // never run into the shapes.
  std::size_t name_width = 12, shape_width = 12;
  for (const Row& row : rows) {
    name_width = std::max(name_width, row.name.size());
    shape_width = std::max(shape_width, row.shape.size());
  }
  name_width += 2;
  shape_width += 2;
  constexpr std::size_t kParamWidth = 12;
  // A placed model gets a column naming each layer's device.
  const bool placed = !rows.empty() && !rows.front().device.empty();
  const std::size_t device_width = placed ? 10 : 0;
  const std::string rule(name_width + shape_width + kParamWidth + device_width, '=');
  std::string out = fmt::format("Model: {}\n{}\n{:<{}}{:<{}}{:>{}}{:>{}}\n{}\n", model.type_name(), rule,
                                "Layer (type)", name_width, "Output Shape", shape_width, "Param #", kParamWidth,
                                placed ? "Device" : "", device_width, rule);
  for (const Row& row : rows) {
    out += fmt::format("{:<{}}{:<{}}{:>{}}{:>{}}\n", row.name, name_width, row.shape, shape_width,
                       grouped(row.params), kParamWidth, row.device, device_width);
  }
  out += fmt::format("{}\nTotal params: {}\nTrainable params: {}\nNon-trainable params: {}\n", rule,
                     grouped(trainable + fixed), grouped(trainable), grouped(fixed));
  return out;
}

}  // namespace ddl::layers
