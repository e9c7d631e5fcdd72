#include <ddl/layers/recompute.hpp>

#include <algorithm>
#include <cstdint>

#include <ddl/core/autograd.hpp>
#include <ddl/core/random.hpp>

namespace ddl::layers {
namespace {

// While a segment reruns: the default generator where the first run found
// it (the same dropout masks); afterwards, also when the rerun throws, the
// generator where the steps since left it, and the segment's buffers as the
// first run left them (BatchNorm's running statistics would move twice).
class Rerun {
 public:
  Rerun(const std::vector<Tensor>& buffers, std::uint64_t seed, std::uint64_t offset)
      : buffers_(buffers), seed_(default_generator().seed()), offset_(default_generator().offset()) {
    for (const Tensor& buffer : buffers_) kept_.push_back(buffer.clone());
    default_generator().set_state(seed, offset);
  }
  ~Rerun() {
    default_generator().set_state(seed_, offset_);
    for (std::size_t i = 0; i < kept_.size(); ++i) buffers_[i].copy_from(kept_[i]);
  }
  Rerun(const Rerun&) = delete;
  Rerun& operator=(const Rerun&) = delete;

 private:
  const std::vector<Tensor>& buffers_;
  std::uint64_t seed_, offset_;
  std::vector<Tensor> kept_;
};

}  // namespace

std::vector<Tensor> buffers_of(const std::vector<const Module*>& modules) {
  std::vector<Tensor> buffers;
  for (const Module* module : modules) {
    for (const auto& entry : module->named_buffers()) buffers.push_back(entry.second);
  }
  return buffers;
}

Tensor recompute(const RecomputedSegment& segment, const Tensor& input) {
  const bool needs = grad_enabled() && ((input.defined() && input.requires_grad()) ||
                                        std::any_of(segment.parameters.begin(), segment.parameters.end(),
                                                    [](const Tensor& p) { return p.defined() && p.requires_grad(); }));
  if (!needs) return segment.forward(input);

  const std::uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  Tensor output;
  {
    const NoGradGuard no_tape;
    output = segment.forward(input);
  }
  // A segment that returns its input (dropout in evaluation, or of rate 0)
  // must not make the input the output of its node.
  if (output.impl() == input.impl()) output = output.detach();
  autograd::record(
      "RecomputeBackward", {&input}, output,
      [forward = segment.forward, buffers = segment.buffers, input = input.detach(),
       input_needs_grad = input.requires_grad(), seed, offset](const Tensor& gradient, const BackwardPass& pass) {
        Tensor x = input.detach();
        if (input_needs_grad) x.set_requires_grad(true);
        Tensor y;
        {
          const Rerun rerun(buffers, seed, offset);
          const EnableGradGuard tape;
          y = forward(x);
        }
        // Within the same pass: deferred weight gradients stay deferred.
        if (y.requires_grad()) autograd::run_backward(y, gradient, false, pass);
        return std::vector{input_needs_grad ? x.grad() : Tensor()};
      });
  return output;
}

}  // namespace ddl::layers
