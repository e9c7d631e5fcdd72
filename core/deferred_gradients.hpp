// Weight gradients computed once for several backward passes: the "W" of the
// B/W split that zero-bubble pipeline schedules make.
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
//     const autograd::DeferredWeightGradients::Recording recording(deferred, m);
//     losses[m].backward();   // dX flows on; dW is kept for later
//   }
//   deferred.compute();       // every deferred dW into .grad, hooks run
//
// What is deferred: the gradient of the second operand of `matmul` when it
// is a 2-D leaf that requires grad and is one of the weights the object was
// made for (a Dense weight; never, say, a pipeline stage's input, whose
// gradient is read right after backward), during a backward run on a thread
// that holds a Recording. Everything else (biases, convolutions,
// activations, inputs) is computed as usual. The deferred gradients are
// added into .grad through the leaf's accumulator, so its gradient hooks run
// then. A weight that also gets gradient by another path in the same pass
// (as the left operand of a product, through another op) accumulates twice,
// once in backward and once in compute(), and its hooks run twice.
//
// Rows are joined in the order of the parts given to Recording (then of
// recording within a part), not of the backward passes, so the sum does not
// depend on the schedule that ran them; with one part and a weight used once
// per pass it is the very product the backward pass would have computed,
// bit for bit.
//
// The rows of a part stay until compute(): a stage that keeps them holds
// the Dense layers' inputs and output gradients of every part at once.
// One object is filled by one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::autograd {

class DeferredWeightGradients {
 public:
  // `weights`: the tensors whose gradients may be deferred (a model's
  // parameters; those that are not 2-D never are).
  explicit DeferredWeightGradients(const std::vector<Tensor>& weights);
  DeferredWeightGradients(const DeferredWeightGradients&) = delete;
  DeferredWeightGradients& operator=(const DeferredWeightGradients&) = delete;

  // While it lives, backward passes on this thread defer weight gradients
  // into `deferred`, as part `part`. One Recording per thread at a time; it
  // must not outlive `deferred`.
  class Recording {
   public:
    Recording(DeferredWeightGradients& deferred, std::size_t part);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;
  };

  // Computes every deferred weight gradient (one product per weight over
  // all the rows kept for it) and adds it into the weight's .grad, weights
  // in the order given to the constructor; a weight's rows go once its
  // gradient is added (if a product throws, the weights after it keep
  // theirs). A weight that is gone by then is skipped.
  void compute();

  // Weights with rows kept, and the bytes those rows hold.
  std::size_t weights() const;
  std::size_t bytes() const;

  // Called by matmul's backward: keeps the rows `x` [rows, in] and
  // `gradient` [rows, out] of `weight`'s gradient xᵀ gradient if this thread
  // is recording into an object made for `weight`, and says whether it did.
  static bool defer(const std::shared_ptr<TensorImpl>& weight, const Tensor& x, const Tensor& gradient);

 private:
  struct Rows {
    std::size_t part;
    Tensor x, gradient;
  };
  struct Entry {
    std::weak_ptr<TensorImpl> weight;
    std::vector<Rows> rows;
  };

  std::vector<Entry> entries_;  // one per weight given, in that order
};

}  // namespace ddl::autograd
