// Residual: y = activation(body(x) + shortcut(x)), the building block of
// ResNets (He et al., "Deep Residual Learning for Image Recognition", 2016),
// and basic_block(), the two-convolution block of that paper's smaller nets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ddl/core/random.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

// What follows the sum: the paper's ReLU, or nothing (a pre-activation
// block, or a residual stream that must stay linear).
enum class ResidualActivation { ReLU, None };

class Residual : public Module {
 public:
  // `body` must not be null; a null `shortcut` is the identity. Registered as
  // children "body" and "shortcut", so parameters read "body.0.weight".
  explicit Residual(std::shared_ptr<Module> body, std::shared_ptr<Module> shortcut = nullptr,
                    ResidualActivation activation = ResidualActivation::ReLU);

  // body(x) and shortcut(x) must have the same shape: the sum never
  // broadcasts, since a broadcast here is always a wiring mistake.
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Residual"; }
  std::string describe() const override;

  Module& body() const { return *body_; }
  Module* shortcut() const { return shortcut_.get(); }  // null: identity
  ResidualActivation activation() const { return activation_; }

 private:
  std::shared_ptr<Module> body_, shortcut_;
  ResidualActivation activation_;
};

// The ResNet basic block: conv 3x3 (stride) - BatchNorm2d - ReLU - conv 3x3 -
// BatchNorm2d, plus the shortcut, then ReLU. The shortcut is the identity
// when stride is 1 and the channel counts agree, else a 1x1 convolution with
// the stride followed by BatchNorm2d (the paper's option B). Convolutions
// have no bias: the batch norm after each would cancel it.
std::shared_ptr<Residual> basic_block(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride,
                                      Generator* generator = nullptr);

}  // namespace ddl::layers
