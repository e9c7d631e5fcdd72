#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/layer_kernels.hpp>

#include <fmt/format.h>

namespace ddl::layers {

namespace {
void check_rate(float p, const char* who) {
  DDL_CHECK(p >= 0.0f && p < 1.0f, "{}: rate p must be in [0, 1), got {}", who, p);
}
}  // namespace

Tensor dropout(const Tensor& input, float p, bool training, Generator* generator) {
  check_rate(p, "dropout");
  require_float(input, "dropout");
  if (!training || p == 0.0f) return input;
  Generator& g = generator != nullptr ? *generator : default_generator();
  const std::uint64_t seed = g.seed();
  const std::int64_t n = input.numel(), calls = kernels::DropoutBits::calls(n);
  const std::uint64_t offset = g.advance(static_cast<std::uint64_t>(calls));
  Tensor mask = Tensor::empty({calls}, {DType::Int32, input.device(), false});
  backend::launch(input.device(), calls, kernels::DropoutBits{mask.data<std::int32_t>(), seed, offset, p});
  Tensor output = empty_float(input.shape(), input.device());
  backend::launch(input.device(), n,
                  kernels::DropoutApply{input.data<float>(), output.data<float>(), mask.data<std::int32_t>(), p});
  if (autograd::needs_grad({&input})) {
    // The gradient flows where the input did: the same bits applied to it.
    autograd::record("DropoutBackward", {&input}, output, [mask, n, p](const Tensor& grad) {
      Tensor grad_in = empty_float(grad.shape(), grad.device());
      backend::launch(grad.device(), n,
                      kernels::DropoutApply{grad.data<float>(), grad_in.data<float>(), mask.data<std::int32_t>(), p});
      return std::vector{grad_in};
    });
  }
  return output;
}

Dropout::Dropout(float p, Generator* generator) : p_(p), generator_(generator) { check_rate(p, "Dropout"); }

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p_, is_training(), generator_); }

std::string Dropout::describe() const { return fmt::format("Dropout({})", p_); }

}  // namespace ddl::layers
