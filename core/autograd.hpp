// The dynamic tape. Every differentiable op that sees an input requiring
// grad records a Node holding what its backward needs and edges to the nodes
// of its inputs. backward() visits the nodes reachable from the output in
// reverse topological order, each once, and leaf tensors accumulate into .grad.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl {

namespace autograd {
class DeferredWeightGradients;
}

// What one backward pass carries to every node it runs: where it keeps the
// weight gradients it defers (DeferredWeightGradients::backward_inputs), and
// as which part; nothing for a plain backward(). Passed down explicitly, so
// no thread or global state decides what a backward computes.
struct BackwardPass {
  autograd::DeferredWeightGradients* deferred = nullptr;
  std::size_t part = 0;
  // Set by run_backward: whether the graph is kept for another backward,
  // so a node may drop a saved tensor early only when it is not.
  bool retain_graph = false;
};

class Node {
 public:
  virtual ~Node() = default;
  // Gradients with respect to each input, given the gradient of the output,
  // within `pass`. An undefined tensor means "no gradient flows to this
  // input".
  virtual std::vector<Tensor> backward(const Tensor& grad_output, const BackwardPass& pass) = 0;
  virtual std::string name() const = 0;
  // Drops saved tensors once backward has used them (unless retain_graph).
  virtual void release_saved() {}

  // Where each input's gradient goes (null for inputs that need none).
  std::vector<std::shared_ptr<Node>> next;
  bool released = false;
};

// Leaf node: adds the incoming gradient to the tensor's .grad, then runs its
// hooks. Holds the tensor weakly so the graph does not keep parameters alive.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {}
  std::vector<Tensor> backward(const Tensor& grad_output, const BackwardPass& pass) override;
  std::string name() const override { return "AccumulateGrad"; }

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// Whether ops record the tape on this thread. Off inside NoGradGuard.
bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// The tape on again inside a backward (which runs without it): for a
// backward that reruns a forward to differentiate it (recompute.hpp).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;
// A backward that reads its pass: matmul's, which may keep its weight's
// gradient for later instead of computing it.
using PassBackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const BackwardPass& pass)>;

// A node whose backward is a closure over the tensors it saved. Most ops use
// it: their backward reads in a few lines next to their forward.
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn backward) : name_(std::move(name)), backward_(std::move(backward)) {}
  FunctionNode(std::string name, PassBackwardFn backward)
      : name_(std::move(name)), pass_backward_(std::move(backward)) {}
  std::vector<Tensor> backward(const Tensor& grad_output, const BackwardPass& pass) override {
    return pass_backward_ ? pass_backward_(grad_output, pass) : backward_(grad_output);
  }
  std::string name() const override { return name_; }
  void release_saved() override {
    backward_ = nullptr;
    pass_backward_ = nullptr;
  }

 private:
  std::string name_;
  BackwardFn backward_;         // most ops'
  PassBackwardFn pass_backward_;  // or one that reads the pass
};

// True when grad mode is on and any input requires grad.
bool needs_grad(const std::vector<const Tensor*>& inputs);

// The node an input's gradient flows to: its grad_fn, its accumulator if it
// is a leaf requiring grad, or null.
std::shared_ptr<Node> edge_to(const Tensor& input);

// A leaf's gradient hooks, run once its .grad has taken a new gradient: by
// its accumulator, or by whoever added into .grad directly (deferred
// weight gradients).
void run_grad_hooks(const std::shared_ptr<TensorImpl>& leaf);

// The leaf's .grad when an op's backward may add its product for the leaf
// straight into it (a GEMM with beta = 1) and run its hooks itself, instead
// of handing a new gradient as large as the leaf to its accumulator, which
// adds it in a second pass: a Dense weight's gradient in a gradient
// bucket's view is then never written twice. Undefined unless .grad exists
// with the leaf's shape and device, and only one edge of any graph leads to
// the accumulator (so the hooks still run once a pass, after the whole
// gradient is in); on the CPU only, for now.
Tensor grad_to_add_into(const std::shared_ptr<TensorImpl>& leaf);

// Connects `node` to its inputs and makes it the grad_fn of `output`.
void record(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs, Tensor& output);
// How an op records itself, in core or outside it: a FunctionNode named
// `name` (e.g. "Conv2dBackward") whose backward returns one gradient per
// input, in the order of `inputs`.
void record(const char* name, const std::vector<const Tensor*>& inputs, Tensor& output, BackwardFn backward);
void record(const char* name, const std::vector<const Tensor*>& inputs, Tensor& output, PassBackwardFn backward);

// Runs backward from `root` with initial gradient `grad_root` (undefined:
// ones, for a scalar root), every node within `pass`.
void run_backward(const Tensor& root, const Tensor& grad_root, bool retain_graph, const BackwardPass& pass = {});

}  // namespace autograd
}  // namespace ddl
