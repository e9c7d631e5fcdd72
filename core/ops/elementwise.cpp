// Elementwise ops: forward through the shared functors, backward written
// with the same ops (under no-grad, as the engine runs it).
#include <ddl/core/ops/helpers.hpp>

namespace ddl {

using namespace ops_detail;

namespace kernels {

BroadcastIndex BroadcastIndex::make(const Shape& in, const Shape& out) {
  BroadcastIndex index;
  if (in == out) return index;
  if (in.numel() == 1) {
    index.mode = kScalar;
    return index;
  }
  index.mode = kGeneral;
  index.rank = out.rank();
  const auto strides = in.strides();
  for (int d = 0; d < out.rank(); ++d) {
    const int in_dim = d - (out.rank() - in.rank());
    index.out_dims[d] = out[d];
    index.in_strides[d] = (in_dim >= 0 && in[in_dim] != 1) ? strides[static_cast<std::size_t>(in_dim)] : 0;
  }
  return index;
}

}  // namespace kernels

namespace {

// Records a unary op whose gradient is backward_op(saved, g).
template <class GradOp>
void record_unary(const char* name, const Tensor& x, Tensor& y, const Tensor& saved, GradOp backward_op) {
  if (!autograd::needs_grad({&x})) return;
  autograd::record(name, {&x}, y, [saved = saved.detach(), backward_op, name](const Tensor& g) {
    return std::vector{zip2(saved, g, backward_op, name)};
  });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = map2(a, b, fn::Add{}, "add");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("AddBackward", {&a, &b}, y, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
      return std::vector{sum_to(g, sa), sum_to(g, sb)};
    });
  }
  return y;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor y = map2(a, b, fn::Sub{}, "sub");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("SubBackward", {&a, &b}, y, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
      return std::vector{sum_to(g, sa), sum_to(neg(g), sb)};
    });
  }
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = map2(a, b, fn::Mul{}, "mul");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record(
        "MulBackward", {&a, &b}, y,
        [a = a.detach(), b = b.detach(), need_a = a.requires_grad(), need_b = b.requires_grad()](const Tensor& g) {
          return std::vector{need_a ? sum_to(mul(g, b), a.shape()) : Tensor(),
                             need_b ? sum_to(mul(g, a), b.shape()) : Tensor()};
        });
  }
  return y;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = map2(a, b, fn::Div{}, "div");
  if (autograd::needs_grad({&a, &b})) {
    // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -y/b.
    autograd::record("DivBackward", {&a, &b}, y,
                     [sa = a.shape(), b = b.detach(), y = y.detach(), need_a = a.requires_grad(),
                      need_b = b.requires_grad()](const Tensor& g) {
                       const Tensor g_over_b = div(g, b);
                       return std::vector{need_a ? sum_to(g_over_b, sa) : Tensor(),
                                          need_b ? sum_to(neg(mul(g_over_b, y)), b.shape()) : Tensor()};
                     });
  }
  return y;
}

Tensor add(const Tensor& a, float b) {
  require_float(a, "add");
  Tensor y = map1(a, fn::AddScalar{b});
  if (autograd::needs_grad({&a})) {
    autograd::record("AddScalarBackward", {&a}, y, [](const Tensor& g) { return std::vector{g}; });
  }
  return y;
}

Tensor mul(const Tensor& a, float b) {
  require_float(a, "mul");
  Tensor y = map1(a, fn::MulScalar{b});
  if (autograd::needs_grad({&a})) {
    autograd::record("MulScalarBackward", {&a}, y, [b](const Tensor& g) { return std::vector{mul(g, b)}; });
  }
  return y;
}

Tensor neg(const Tensor& x) {
  require_float(x, "neg");
  Tensor y = map1(x, fn::Neg{});
  if (autograd::needs_grad({&x})) {
    autograd::record("NegBackward", {&x}, y, [](const Tensor& g) { return std::vector{neg(g)}; });
  }
  return y;
}

Tensor exp(const Tensor& x) {
  require_float(x, "exp");
  Tensor y = map1(x, fn::Exp{});
  record_unary("ExpBackward", x, y, y, fn::Mul{});
  return y;
}

Tensor log(const Tensor& x) {
  require_float(x, "log");
  Tensor y = map1(x, fn::Log{});
  if (autograd::needs_grad({&x})) {
    autograd::record("LogBackward", {&x}, y, [x = x.detach()](const Tensor& g) { return std::vector{div(g, x)}; });
  }
  return y;
}

Tensor sqrt(const Tensor& x) {
  require_float(x, "sqrt");
  Tensor y = map1(x, fn::Sqrt{});
  record_unary("SqrtBackward", x, y, y, fn::SqrtGrad{});
  return y;
}

Tensor pow(const Tensor& x, float exponent) {
  require_float(x, "pow");
  Tensor y = map1(x, fn::PowScalar{exponent});
  record_unary("PowBackward", x, y, x, fn::PowGrad{exponent});
  return y;
}

Tensor relu(const Tensor& x) {
  require_float(x, "relu");
  Tensor y = map1(x, fn::Relu{});
  // The output, not the input, kept for backward: the same mask, and the
  // input (a convolution's or a Dense layer's output, which nothing else
  // keeps) is freed now.
  record_unary("ReluBackward", x, y, y, fn::ReluGrad{});
  return y;
}

Tensor relu_backward(const Tensor& output, const Tensor& grad) {
  require_float(output, "relu_backward");
  require_float(grad, "relu_backward");
  return zip2(output, grad, fn::ReluGrad{}, "relu_backward");
}

Tensor abs(const Tensor& x) {
  require_float(x, "abs");
  Tensor y = map1(x, fn::Abs{});
  record_unary("AbsBackward", x, y, x, fn::AbsGrad{});
  return y;
}

Tensor sigmoid(const Tensor& x) {
  require_float(x, "sigmoid");
  Tensor y = map1(x, fn::Sigmoid{});
  record_unary("SigmoidBackward", x, y, y, fn::SigmoidGrad{});
  return y;
}

Tensor tanh(const Tensor& x) {
  require_float(x, "tanh");
  Tensor y = map1(x, fn::Tanh{});
  record_unary("TanhBackward", x, y, y, fn::TanhGrad{});
  return y;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, float b) { return add(a, b); }
Tensor operator-(const Tensor& a, float b) { return add(a, -b); }
Tensor operator*(const Tensor& a, float b) { return mul(a, b); }
Tensor operator/(const Tensor& a, float b) { return mul(a, 1.0f / b); }
Tensor operator*(float a, const Tensor& b) { return mul(b, a); }
Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace ddl
