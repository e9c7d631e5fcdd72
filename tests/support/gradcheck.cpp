// gradcheck: autograd's gradients against central finite differences; the
// choice of step and tolerances is derived in gradcheck.hpp.
#include "gradcheck.hpp"

#include <cmath>
#include <sstream>

namespace ddl::test {
namespace {

// L = sum_j w_j y_j in double, from y's float32 values.
double weighted_sum(const Tensor& y, const std::vector<float>& weights) {
  const std::vector<float> values = y.to_vector<float>();
  double total = 0.0;
  for (std::size_t j = 0; j < values.size(); ++j) total += static_cast<double>(weights[j]) * values[j];
  return total;
}

std::string index_of(const Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    index[static_cast<std::size_t>(d)] = flat % shape[d];
    flat /= shape[d];
  }
  std::string text = "[";
  for (std::size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const GradcheckResult& result) {
  return os << (result.ok ? "gradcheck passed" : result.report);
}

GradcheckResult gradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  std::ostringstream shapes;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::Float32) {
      return {false, "gradcheck: input " + std::to_string(i) + " is not float32"};
    }
    shapes << (i ? ", " : "") << inputs[i].shape();
  }

  // Analytic: backward of sum(f(x) * w) from fresh leaves.
  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs) leaves.push_back(input.detach().clone().set_requires_grad(true));
  const Tensor output = f(leaves);
  if (output.dtype() != DType::Float32) return {false, "gradcheck: f returned a non-float32 tensor"};
  Generator weight_generator(options.weight_seed);
  const Tensor weights =
      uniform(output.shape(), -1.0f, 1.0f, TensorOptions{}.with_device(output.device()), &weight_generator);
  const std::vector<float> host_weights = weights.to_vector<float>();
  if (output.requires_grad()) sum(mul(output, weights)).backward();

  // Numeric: central differences, one element at a time, without the tape.
  const NoGradGuard no_grad;
  std::vector<Tensor> probes;
  for (const Tensor& input : inputs) probes.push_back(input.detach().clone());

  double worst_excess = -INFINITY;
  std::string worst;
  std::int64_t failures = 0, checked = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor grad = leaves[i].grad();
    if (grad.defined() && grad.shape() != inputs[i].shape()) {
      return {false, "gradcheck: the gradient of input " + std::to_string(i) + " has shape " + grad.shape().str() +
                         ", the input " + inputs[i].shape().str()};
    }
    const std::vector<float> analytic =
        grad.defined() ? grad.to_vector<float>() : std::vector<float>(static_cast<std::size_t>(inputs[i].numel()));
    const std::vector<float> original = inputs[i].to_vector<float>();
    std::vector<float> values = original;
    for (std::size_t k = 0; k < values.size(); ++k) {
      const float plus = static_cast<float>(original[k] + options.step);
      const float minus = static_cast<float>(original[k] - options.step);
      values[k] = plus;
      probes[i] = from_vector(values, inputs[i].shape(), TensorOptions{}.with_device(inputs[i].device()));
      const double loss_plus = weighted_sum(f(probes), host_weights);
      values[k] = minus;
      probes[i] = from_vector(values, inputs[i].shape(), TensorOptions{}.with_device(inputs[i].device()));
      const double loss_minus = weighted_sum(f(probes), host_weights);
      values[k] = original[k];

      const double numeric = (loss_plus - loss_minus) / (static_cast<double>(plus) - static_cast<double>(minus));
      const double error = std::abs(analytic[k] - numeric);
      const double allowed = options.atol + options.rtol * std::abs(numeric);
      const double excess = std::isnan(error) ? INFINITY : error - allowed;
      ++checked;
      if (!(error <= allowed)) ++failures;
      if (excess > worst_excess) {
        worst_excess = excess;
        std::ostringstream text;
        text.precision(7);
        text << "input " << i << " (shape " << inputs[i].shape() << ") element "
             << index_of(inputs[i].shape(), static_cast<std::int64_t>(k)) << " = " << original[k] << ": analytic "
             << analytic[k] << ", numeric " << numeric << ", |diff| " << error << " vs allowed " << allowed;
        worst = text.str();
      }
    }
    probes[i] = inputs[i].detach().clone();
  }
  if (failures == 0) return {};
  std::ostringstream report;
  report << "gradcheck failed for inputs of shapes (" << shapes.str() << "): " << failures << " of " << checked
         << " gradient elements out of tolerance (step " << options.step << ", atol " << options.atol << ", rtol "
         << options.rtol << "); worst: " << worst;
  return {false, report.str()};
}

}  // namespace ddl::test
