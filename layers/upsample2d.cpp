#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/layer_kernels.hpp>
#include <ddl/layers/upsample2d.hpp>

#include <fmt/format.h>

namespace ddl::layers {

namespace {
void check_scale(std::int64_t scale, const char* who) {
  DDL_CHECK(scale >= 1, "{}: scale must be at least 1, got {}", who, scale);
}
}  // namespace

Tensor upsample_nearest2d(const Tensor& input, std::int64_t scale) {
  check_scale(scale, "upsample_nearest2d");
  require_float(input, "upsample_nearest2d");
  DDL_CHECK(input.dim() == 4, "upsample_nearest2d: expected a 4-D NCHW input, got shape {}", input.shape());
  const std::int64_t height = input.size(2), width = input.size(3);
  // The kernels index the output with int64, so its element count must fit
  // (the input's already does).
  std::int64_t out_height = 0, out_width = 0, out_numel = 0;
  const bool overflow = __builtin_mul_overflow(height, scale, &out_height) ||
                        __builtin_mul_overflow(width, scale, &out_width) ||
                        __builtin_mul_overflow(input.size(0) * input.size(1), out_height, &out_numel) ||
                        __builtin_mul_overflow(out_numel, out_width, &out_numel);
  DDL_CHECK(!overflow, "upsample_nearest2d: scale {} makes the output of input shape {} too large to index", scale,
            input.shape());
  Tensor output = empty_float({input.size(0), input.size(1), out_height, out_width}, input.device());
  backend::launch(input.device(), out_numel,
                  kernels::Upsample2dForward{input.data<float>(), output.data<float>(), height, width, scale});
  if (autograd::needs_grad({&input})) {
    autograd::record(
        "Upsample2dBackward", {&input}, output, [shape = input.shape(), height, width, scale](const Tensor& grad) {
          Tensor grad_in = empty_float(shape, grad.device());
          backend::launch(grad.device(), shape.numel(),
                          kernels::Upsample2dBackward{grad.data<float>(), grad_in.data<float>(), height, width, scale});
          return std::vector{grad_in};
        });
  }
  return output;
}

Upsample2d::Upsample2d(std::int64_t scale) : scale_(scale) { check_scale(scale, "Upsample2d"); }

Tensor Upsample2d::forward(const Tensor& input) { return upsample_nearest2d(input, scale_); }

std::string Upsample2d::describe() const { return fmt::format("Upsample2d(scale={})", scale_); }

}  // namespace ddl::layers
