// Elementwise math as __host__ __device__ functors: the single definition of
// each op's arithmetic, used by the CPU loop and by the CUDA kernel alike
// (see kernels.hpp for how they are applied to arrays).
#pragma once

#include <cmath>

#include <ddl/core/macros.hpp>

namespace ddl::fn {

// Unary forward ops.
struct Neg { DDL_HOST_DEVICE float operator()(float x) const { return -x; } };
struct Exp { DDL_HOST_DEVICE float operator()(float x) const { return expf(x); } };
struct Log { DDL_HOST_DEVICE float operator()(float x) const { return logf(x); } };
struct Sqrt { DDL_HOST_DEVICE float operator()(float x) const { return sqrtf(x); } };
// NaN passes through, as in PyTorch and TensorFlow: a diverged value must
// reach the loss, where training stops on it, not vanish here.
struct Relu { DDL_HOST_DEVICE float operator()(float x) const { return x > 0.0f || x != x ? x : 0.0f; } };
struct Abs { DDL_HOST_DEVICE float operator()(float x) const { return fabsf(x); } };
struct Tanh { DDL_HOST_DEVICE float operator()(float x) const { return tanhf(x); } };
// Split by sign so expf never overflows: for x < 0, e^x / (1 + e^x).
struct Sigmoid {
  DDL_HOST_DEVICE float operator()(float x) const {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
  }
};
struct AddScalar {
  float value;
  DDL_HOST_DEVICE float operator()(float x) const { return x + value; }
};
struct MulScalar {
  float value;
  DDL_HOST_DEVICE float operator()(float x) const { return x * value; }
};
struct PowScalar {
  float exponent;
  DDL_HOST_DEVICE float operator()(float x) const { return powf(x, exponent); }
};
struct Fill {
  float value;
  DDL_HOST_DEVICE float operator()(float) const { return value; }
};

// Binary forward ops.
struct Add { DDL_HOST_DEVICE float operator()(float a, float b) const { return a + b; } };
struct Sub { DDL_HOST_DEVICE float operator()(float a, float b) const { return a - b; } };
struct Mul { DDL_HOST_DEVICE float operator()(float a, float b) const { return a * b; } };
struct Div { DDL_HOST_DEVICE float operator()(float a, float b) const { return a / b; } };

// Backward ops: (saved value, upstream gradient) -> input gradient.
struct ReluGrad {  // saved: output y, positive exactly where the input is (NaN: neither, gradient 0)
  DDL_HOST_DEVICE float operator()(float y, float g) const { return y > 0.0f ? g : 0.0f; }
};
struct AbsGrad {  // saved: input x; the subgradient 0 at x = 0, as PyTorch
  DDL_HOST_DEVICE float operator()(float x, float g) const { return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f); }
};
struct SigmoidGrad {  // saved: output y
  DDL_HOST_DEVICE float operator()(float y, float g) const { return g * y * (1.0f - y); }
};
struct TanhGrad {  // saved: output y
  DDL_HOST_DEVICE float operator()(float y, float g) const { return g * (1.0f - y * y); }
};
struct SqrtGrad {  // saved: output y
  DDL_HOST_DEVICE float operator()(float y, float g) const { return g * 0.5f / y; }
};
struct PowGrad {  // saved: input x; d/dx x^p = p x^(p-1)
  float exponent;
  DDL_HOST_DEVICE float operator()(float x, float g) const { return g * exponent * powf(x, exponent - 1.0f); }
};

}  // namespace ddl::fn
