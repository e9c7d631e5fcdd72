// Parameter-free layers: the activations (over core's shared functors, the
// same code on CPU and GPU) and Flatten.
#pragma once

#include <ddl/layers/module.hpp>

namespace ddl::layers {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ReLU"; }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Tanh"; }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sigmoid"; }
};

class Softmax : public Module {
 public:
  explicit Softmax(int dim = -1) : dim_(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Softmax"; }
  std::string describe() const override;
  int dim() const { return dim_; }

 private:
  int dim_;
};

// log(softmax(x)) along `dim`, computed as x - max - log(sum(exp(x - max)))
// by core's log_softmax, so it stays finite where softmax underflows to 0.
// Followed by a negative log-likelihood it equals cross_entropy on the raw
// logits; cross_entropy is the cheaper choice for training (one fused node).
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int dim = -1) : dim_(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "LogSoftmax"; }
  std::string describe() const override;
  int dim() const { return dim_; }

 private:
  int dim_;
};

// Keeps dim 0 (the batch) and flattens the rest: [N, C, H, W] -> [N, C*H*W].
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Flatten"; }
};

}  // namespace ddl::layers
