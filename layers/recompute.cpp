#include <ddl/layers/recompute.hpp>

#include <algorithm>
#include <cstdint>

#include <ddl/core/autograd.hpp>
#include <ddl/core/random.hpp>

namespace ddl::layers {

std::vector<Tensor> buffers_of(const std::vector<const Module*>& modules) {
  std::vector<Tensor> buffers;
  for (const Module* module : modules) {
    for (const auto& entry : module->named_buffers()) buffers.push_back(entry.second);
  }
  return buffers;
}

Tensor recompute(const RecomputedSegment& segment, const Tensor& input) {
  const bool needs =
      grad_enabled() && ((input.defined() && input.requires_grad()) ||
                                   std::any_of(segment.parameters.begin(), segment.parameters.end(),
                                               [](const Tensor& p) { return p.defined() && p.requires_grad(); }));
  if (!needs) return segment.forward(input);

  Generator& generator = default_generator();
  const std::uint64_t seed = generator.seed(), offset = generator.offset();
  Tensor output;
  {
    const NoGradGuard no_tape;
    output = segment.forward(input);
  }
  autograd::record("RecomputeBackward", {&input}, output,
                   [segment, input = input.detach(), input_needs_grad = input.requires_grad(), seed, offset](
                       const Tensor& gradient, const BackwardPass& pass) {
                     // The rerun draws what the first run drew; then the generator goes
                     // on from where the steps since left it.
                     Generator& random = default_generator();
                     const std::uint64_t now_seed = random.seed(), now_offset = random.offset();
                     random.set_state(seed, offset);
                     std::vector<Tensor> kept;
                     for (const Tensor& buffer : segment.buffers) kept.push_back(buffer.clone());
                     Tensor x = input.detach();
                     if (input_needs_grad) x.set_requires_grad(true);
                     Tensor y;
                     {
                       const EnableGradGuard tape;
                       y = segment.forward(x);
                     }
                     for (std::size_t i = 0; i < kept.size(); ++i) segment.buffers[i].copy_from(kept[i]);
                     random.set_state(now_seed, now_offset);
                     // Within the same pass: deferred weight gradients stay deferred.
                     if (y.requires_grad()) autograd::run_backward(y, gradient, false, pass);
                     return std::vector{input_needs_grad ? x.grad() : Tensor()};
                   });
  return output;
}

}  // namespace ddl::layers
