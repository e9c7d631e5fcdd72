#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/init.hpp>

#include <fmt/format.h>

namespace ddl::layers {

Tensor dense(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  DDL_CHECK(input.defined() && weight.defined() && weight.dim() == 2,
            "dense: expected a 2-D weight [in, out] (Keras's layout, not PyTorch's [out, in])");
  DDL_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(0),
            "dense: input of shape {} has {} features, the weight {} expects {} (weights are [in, out]; transpose a "
            "PyTorch [out, in] weight)",
            input.shape(), input.dim() >= 1 ? input.size(-1) : 0, weight.shape(), weight.size(0));
  Tensor x = input.dim() == 1 ? input.reshape({1, input.size(0)}) : input;
  Tensor y = matmul(x, weight);
  if (bias.defined()) {
    DDL_CHECK(bias.shape() == Shape{weight.size(1)}, "dense: bias of shape {} does not match weight {}",
              bias.shape(), weight.shape());
    y = y + bias;
  }
  return input.dim() == 1 ? y.reshape({weight.size(1)}) : y;
}

Dense::Dense(std::int64_t in_features, std::int64_t out_features, bool bias, Generator* generator)
    : in_features_(in_features), out_features_(out_features) {
  DDL_CHECK(in_features > 0 && out_features > 0, "Dense: features must be positive, got in={} out={}", in_features,
            out_features);
  weight_ = register_parameter("weight", initial_weights({in_features, out_features}, Init::GlorotUniform, cpu(),
                                                         generator));
  if (bias) bias_ = register_parameter("bias", zeros({out_features}));
}

Tensor Dense::forward(const Tensor& input) { return dense(input, weight_, bias_); }

std::string Dense::parameter_layout(const std::string& name) const {
  if (name != "weight") return {};
  return fmt::format(
      "{} stores its weight as [in, out] = [{}, {}], Keras's layout; PyTorch's Linear stores "
      "[out, in]: transpose its weight",
      describe(), in_features_, out_features_);
}

std::string Dense::describe() const {
  return "Dense(" + std::to_string(in_features_) + ", " + std::to_string(out_features_) +
         (bias_.defined() ? ")" : ", bias=false)");
}

}  // namespace ddl::layers
