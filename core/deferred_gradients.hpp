// Backward in two halves, the B/W split that zero-bubble pipeline schedules
// make (PyTorch's pipelining calls them stage_backward_input and
// stage_backward_weight): a backward for the inputs only, now, and one for
// the weights, once for several such passes.
//
// A Dense layer's backward is two products: dX = dY Wᵀ, which the layer
// before needs now, and dW = Xᵀ dY, which only the optimizer needs. When a
// batch is cut into M micro-batches of m rows, computing dW in each
// micro-batch's backward is M products of inner size m, each writing every
// element of dW and then adding it into .grad: for a 4096x4096 weight and
// m = 8 that is 64 MiB written, read and written again per micro-batch for
// 0.27 GFLOP, memory traffic rather than arithmetic. Deferred, the rows of X
// and dY of every micro-batch are kept (m x (in + out) floats each) and dW
// is one product of inner size M*m at the end: the weight's gradient is
// written once per batch, as without micro-batches.
//
//   autograd::DeferredWeightGradients deferred(model.parameters());
//   for (int m = 0; m < M; ++m) {
//     deferred.backward_inputs(losses[m], {}, m);  // dX flows on; dW is kept for later
//   }
//   deferred.backward_weights();  // every kept dW into .grad, hooks run
//
// What is deferred: the gradient of the second operand of `matmul` when it
// is a 2-D leaf that requires grad and is one of the weights the object was
// made for (a Dense weight; never, say, a pipeline stage's input, whose
// gradient is read right after backward), and a convolution's weight
// gradient when its weight is such a leaf (with its bias's, which the same
// backward-weights pass gives: layers/conv2d.cpp keeps its input and
// output gradient as the rows, joined along the batch), in a pass of
// backward_inputs (the pass carries the object to the op's backward:
// autograd.hpp's BackwardPass; a plain backward() defers nothing).
// Everything else (Dense biases, activations, inputs) is computed as usual. The deferred gradients are
// added into .grad, and the leaf's gradient hooks run then: by the GEMM
// straight into .grad when the weight has one (beta = 1: no product as
// large as the weight is written and read back, which is what keeps a
// schedule's per-micro-batch W cheap), else as the product handed to the
// leaf's accumulator. A weight that also gets gradient by another path in the same pass
// (as the left operand of a product, through another op) accumulates twice,
// once in backward_inputs and once in backward_weights, and its hooks run
// twice.
//
// Rows are joined in the order of the parts given to backward_inputs (then
// of keeping within a part), not of the passes, so the sum does not depend
// on the schedule that ran them; with one part, a weight used once per
// pass and no .grad yet it is the very product the backward pass would have
// computed, bit for bit (added into an existing .grad, the GEMM's own
// summation order decides, and may round otherwise than product-then-add).
//
// The rows of a part stay until backward_weights(): a stage that keeps them
// holds the Dense layers' inputs and output gradients of every part at
// once. One object is filled by one thread at a time; objects do not share
// anything, so several may be filled on several threads.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::autograd {

class DeferredWeightGradients {
 public:
  // `weights`: the tensors whose gradients may be deferred (a model's
  // parameters; 1-D ones, biases and norms' scales, never are on their
  // own).
  explicit DeferredWeightGradients(const std::vector<Tensor>& weights);
  DeferredWeightGradients(const DeferredWeightGradients&) = delete;
  DeferredWeightGradients& operator=(const DeferredWeightGradients&) = delete;

  // The backward for the inputs: backward from `root` with `gradient`
  // (undefined: ones, for a scalar root, as Tensor::backward), every
  // gradient computed as usual but the listed weights' products, whose rows
  // are kept as part `part`.
  void backward_inputs(const Tensor& root, const Tensor& gradient, std::size_t part, bool retain_graph = false);

  // The backward for the weights: every kept weight gradient (one product
  // per weight over all the rows kept for it) added into the weight's
  // .grad, from the last weight given to the constructor to the first (the
  // order backward reaches a model's layers, in which data parallelism's
  // gradient buckets fill); a weight's rows go once its gradient is added
  // (if a product throws, the weights before it keep theirs). A weight
  // that is gone by then is skipped.
  void backward_weights();
  // The same for the rows of `parts` alone (a schedule's W of some
  // micro-batches): one product per weight over those parts' rows, in part
  // order; the other parts' rows stay.
  void backward_weights(const std::vector<std::size_t>& parts);

  // Weights with rows kept, and the bytes those rows hold.
  std::size_t weights() const;
  std::size_t bytes() const;

  // How an op other than matmul computes a kept weight's gradient from the
  // rows of its parts joined along dim 0: the gradients of the weight and
  // of each of its companions, in that order (a convolution's
  // backward-weights pass, which gives its bias's gradient too).
  using Product = std::function<std::vector<Tensor>(const Tensor& x, const Tensor& gradient)>;

  // Called by an op's backward within a pass of backward_inputs: keeps the
  // rows `x` and `gradient` of `weight`'s gradient as part `part` if the
  // object was made for `weight`, and says whether it did. matmul's rows
  // are x [rows, in] and gradient [rows, out], the gradient xᵀ gradient;
  // another op gives its `product` and the `companions` whose gradients
  // that product gives too (each a leaf, or expired: skipped).
  bool keep(const std::shared_ptr<TensorImpl>& weight, std::size_t part, const Tensor& x, const Tensor& gradient,
            Product product = {}, std::vector<std::weak_ptr<TensorImpl>> companions = {});

 private:
  struct Rows {
    std::size_t part;
    Tensor x, gradient;
  };
  struct Entry {
    std::weak_ptr<TensorImpl> weight;
    std::vector<Rows> rows{};
    Product product{};  // empty: matmul's
    std::vector<std::weak_ptr<TensorImpl>> companions{};
  };

  template <class Selected>
  void compute(Selected selected);

  std::vector<Entry> entries_;  // one per weight given, in that order
};

}  // namespace ddl::autograd
