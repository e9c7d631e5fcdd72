#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/layer_kernels.hpp>

#include <bit>
#include <cstdint>

#include <fmt/format.h>

namespace ddl::layers {

namespace {
void check_rate(float p, const char* who) {
  DDL_CHECK(p >= 0.0f && p < 1.0f, "{}: rate p must be in [0, 1), got {}", who, p);
}
}  // namespace

namespace {

// A mask's words as the bytes DropoutMask stored in them, byte l of word j
// the decision for element 8j + l: little-endian, as the CPUs and GPUs ddl
// runs on are.
static_assert(std::endian::native == std::endian::little, "dropout masks are read as bytes of little-endian words");
const std::uint8_t* keep_bytes(const Tensor& mask) {
  return reinterpret_cast<const std::uint8_t*>(mask.data<std::int64_t>());
}

// The output and its backward for the keep decisions `mask` of every element.
Tensor apply_mask(const Tensor& input, const Tensor& mask, float p) {
  const std::int64_t n = input.numel();
  Tensor output = empty_float(input.shape(), input.device());
  backend::launch(input.device(), n,
                  kernels::DropoutApply{input.data<float>(), output.data<float>(), keep_bytes(mask), p});
  if (autograd::needs_grad({&input})) {
    // The gradient flows where the input did: the same decisions applied to it.
    autograd::record("DropoutBackward", {&input}, output, [mask, n, p](const Tensor& grad) {
      Tensor grad_in = empty_float(grad.shape(), grad.device());
      backend::launch(grad.device(), n,
                      kernels::DropoutApply{grad.data<float>(), grad_in.data<float>(), keep_bytes(mask), p});
      return std::vector{grad_in};
    });
  }
  return output;
}

Generator& generator_or_default(Generator* generator) {
  return generator != nullptr ? *generator : default_generator();
}

}  // namespace

Tensor dropout(const Tensor& input, float p, bool training, Generator* generator) {
  check_rate(p, "dropout");
  require_float(input, "dropout");
  if (!training || p == 0.0f) return input;
  Generator& g = generator_or_default(generator);
  const std::int64_t calls = kernels::DropoutMask::calls(input.numel());
  const std::uint64_t offset = g.advance(static_cast<std::uint64_t>(calls));
  Tensor mask = Tensor::empty({calls}, {DType::Int64, input.device(), false});
  backend::launch(input.device(), calls, kernels::DropoutMask{mask.data<std::int64_t>(), g.seed(), offset, p});
  return apply_mask(input, mask, p);
}

Tensor dropout_of_part(const Tensor& input, float p, bool training, int dim, std::int64_t begin, std::int64_t whole,
                       Generator* generator) {
  check_rate(p, "dropout_of_part");
  require_float(input, "dropout_of_part");
  DDL_CHECK(input.dim() >= 1, "dropout_of_part: needs a tensor with at least 1 dim");
  dim = input.shape().normalize_dim(dim, "dropout_of_part");
  const std::int64_t size = input.size(dim);
  DDL_CHECK(0 <= begin && begin + size <= whole,
            "dropout_of_part: a part of {} from {} along dim {} does not fit in a whole of {} there", size, begin, dim,
            whole);
  if (!training || p == 0.0f) return input;
  std::int64_t inner = 1;
  for (int d = dim + 1; d < input.dim(); ++d) inner *= input.size(d);
  const std::int64_t whole_numel = size == 0 ? 0 : input.numel() / size * whole;
  Generator& g = generator_or_default(generator);
  const std::uint64_t offset = g.advance(static_cast<std::uint64_t>(kernels::DropoutMask::calls(whole_numel)));
  const std::int64_t calls = kernels::DropoutMask::calls(input.numel());
  Tensor mask = Tensor::empty({calls}, {DType::Int64, input.device(), false});
  if (input.numel() > 0) {
    backend::launch(input.device(), calls,
                    kernels::DropoutMaskOfPart{mask.data<std::int64_t>(), g.seed(), offset, p, size * inner,
                                               whole * inner, begin * inner});
  }
  return apply_mask(input, mask, p);
}

Dropout::Dropout(float p, Generator* generator) : p_(p), generator_(generator) { check_rate(p, "Dropout"); }

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p_, is_training(), generator_); }

std::string Dropout::describe() const { return fmt::format("Dropout({})", p_); }

}  // namespace ddl::layers
