#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/activation.hpp>

namespace ddl::layers {

Tensor ReLU::forward(const Tensor& input) { return relu(input); }
Tensor Tanh::forward(const Tensor& input) { return tanh(input); }
Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }
Tensor Softmax::forward(const Tensor& input) { return softmax(input, dim_); }
Tensor LogSoftmax::forward(const Tensor& input) { return log_softmax(input, dim_); }
std::string Softmax::describe() const { return "Softmax(dim=" + std::to_string(dim_) + ")"; }
std::string LogSoftmax::describe() const { return "LogSoftmax(dim=" + std::to_string(dim_) + ")"; }

Tensor Flatten::forward(const Tensor& input) {
  DDL_CHECK(input.defined() && input.dim() >= 1, "flatten: input needs a batch dim");
  return input.dim() == 1 ? input.reshape({input.size(0), 1}) : input.flatten(1);
}

}  // namespace ddl::layers
