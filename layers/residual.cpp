// Residual's forward (the shape check before the sum) and description, and
// the ResNet basic block assembled from Conv2d, BatchNorm2d and ReLU.
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/residual.hpp>
#include <ddl/layers/sequential.hpp>

namespace ddl::layers {
namespace {

// A container is named by its children's types (their options would make a
// summary row too wide to read); a single layer by its own description.
std::string contents(const Module& module) {
  if (module.children().empty()) return module.describe();
  std::string text;
  for (const auto& [name, child] : module.children()) text += (text.empty() ? "" : ", ") + child->type_name();
  return text;
}

}  // namespace

Residual::Residual(std::shared_ptr<Module> body, std::shared_ptr<Module> shortcut, ResidualActivation activation)
    : body_(std::move(body)), shortcut_(std::move(shortcut)), activation_(activation) {
  DDL_CHECK(body_ != nullptr, "Residual: body is null (a null shortcut means identity, a null body is an error)");
  register_module("body", body_);
  if (shortcut_) register_module("shortcut", shortcut_);
}

Tensor Residual::forward(const Tensor& input) {
  const Tensor branch = body_->forward(input);
  const Tensor skip = shortcut_ ? shortcut_->forward(input) : input;
  DDL_CHECK(branch.shape() == skip.shape(),
            "Residual: body output of shape {} does not match shortcut output of shape {} (input of shape {}, "
            "shortcut {})",
            branch.shape(), skip.shape(), input.shape(), shortcut_ ? contents(*shortcut_) : "identity");
  const Tensor sum = branch + skip;
  return activation_ == ResidualActivation::ReLU ? relu(sum) : sum;
}

std::string Residual::describe() const {
  return "Residual(body: " + contents(*body_) + "; shortcut: " + (shortcut_ ? contents(*shortcut_) : "identity") +
         "; activation: " + (activation_ == ResidualActivation::ReLU ? "ReLU" : "none") + ")";
}

std::shared_ptr<Residual> basic_block(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride,
                                      Generator* generator) {
  DDL_CHECK(in_channels > 0 && out_channels > 0 && stride > 0,
            "basic_block: channel counts and stride must be positive, got in={} out={} stride={}", in_channels,
            out_channels, stride);
  const Conv2dOptions first{.kernel_size = 3, .stride = stride, .padding = 1, .bias = false};
  const Conv2dOptions second{.kernel_size = 3, .stride = 1, .padding = 1, .bias = false};
  auto body = std::make_shared<Sequential>();
  body->emplace<Conv2d>(in_channels, out_channels, first, generator)
      .emplace<BatchNorm2d>(out_channels)
      .emplace<ReLU>()
      .emplace<Conv2d>(out_channels, out_channels, second, generator)
      .emplace<BatchNorm2d>(out_channels);
  std::shared_ptr<Sequential> projection;
  if (stride != 1 || in_channels != out_channels) {
    projection = std::make_shared<Sequential>();
    const Conv2dOptions pointwise{.kernel_size = 1, .stride = stride, .padding = 0, .bias = false};
    projection->emplace<Conv2d>(in_channels, out_channels, pointwise, generator).emplace<BatchNorm2d>(out_channels);
  }
  return std::make_shared<Residual>(std::move(body), std::move(projection));
}

}  // namespace ddl::layers
