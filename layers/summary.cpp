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
  };
  std::vector<Row> rows;
  const bool was_training = model.is_training();
  model.eval();
  {
    const NoGradGuard no_grad;
    Tensor x = zeros(Shape(dims), {DType::Float32, device, false});
    // Only a Sequential feeds each child the previous child's output; any
    // other module (a Residual, say) is one row, run as a whole.
    if (dynamic_cast<const Sequential*>(&model) == nullptr) {
      x = model.forward(x);
      rows.push_back({model.describe(), shape_text(x.shape()), model.parameter_count()});
    } else {
      for (const auto& [name, child] : model.children()) {
        x = child->forward(x);
        rows.push_back({fmt::format("{} ({})", name, child->describe()), shape_text(x.shape()),
                        child->parameter_count()});
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
  const std::string rule(name_width + shape_width + kParamWidth, '=');
  std::string out = fmt::format("Model: {}\n{}\n{:<{}}{:<{}}{:>{}}\n{}\n", model.type_name(), rule, "Layer (type)",
                                name_width, "Output Shape", shape_width, "Param #", kParamWidth, rule);
  for (const Row& row : rows) {
    out += fmt::format("{:<{}}{:<{}}{:>{}}\n", row.name, name_width, row.shape, shape_width, grouped(row.params),
                       kParamWidth);
  }
  out += fmt::format("{}\nTotal params: {}\nTrainable params: {}\nNon-trainable params: {}\n", rule,
                     grouped(trainable + fixed), grouped(trainable), grouped(fixed));
  return out;
}

}  // namespace ddl::layers
