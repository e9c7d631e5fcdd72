// Activation recomputation (gradient checkpointing: Chen et al. 2016,
// "Training Deep Nets with Sublinear Memory Cost"; PyTorch's
// torch.utils.checkpoint, Megatron-LM's --recompute-granularity full): a
// segment of layers runs its forward without the tape, keeping only its
// input; its backward runs that forward again, on the tape this time, and
// differentiates through it. The segment's activations then live only
// during its own backward: memory traded for one more forward of the
// segment per backward.
//
// Bit for bit what the segment computes without recomputation: the rerun
// draws the default generator's numbers from where the first run drew them
// (dropout's masks are the same), and the buffers the first run updated
// (BatchNorm's running statistics), which the rerun would update a second
// time, are put back as the first run left them. A layer given a generator
// of its own (Dropout(p, &generator)) would draw anew in the rerun:
// Sequential::recompute refuses one.
//
//   const RecomputedSegment block{.forward = [&](const Tensor& x) { return layers.forward(x); },
//                                 .parameters = layers.parameters(), .buffers = buffers_of(layers)};
//   Tensor y = recompute(block, x);  // y.backward(...) reruns layers.forward
#pragma once

#include <functional>
#include <vector>

#include <ddl/core/tensor.hpp>
#include <ddl/layers/module.hpp>

namespace ddl::layers {

struct RecomputedSegment {
  // The segment's forward; it must stay valid until the backward of every
  // output it made has run (the layers it calls, say, must live).
  std::function<Tensor(const Tensor&)> forward;
  // What the segment differentiates: with the tape on, an output is
  // recorded when the input or one of these requires grad.
  std::vector<Tensor> parameters;
  // What its forward updates in place, put back after the rerun.
  std::vector<Tensor> buffers;
};

// The buffers (by value: shared tensors) of `modules`.
std::vector<Tensor> buffers_of(const std::vector<const Module*>& modules);

// segment.forward(input), keeping only `input` (and the generator's state)
// for the backward, which reruns it. With the tape off, or nothing that
// requires grad, it is segment.forward(input) and nothing more.
Tensor recompute(const RecomputedSegment& segment, const Tensor& input);

}  // namespace ddl::layers
