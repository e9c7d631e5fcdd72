// The optimizers' update rules as index kernels: element i of a parameter is
// updated in place, with its state buffers, from grad[i] in one pass and no
// temporaries, one kernel body for both backends. Hyper-parameters
// arrive as float so the CPU and the GPU do the same float arithmetic; the
// step-dependent factors (Adam's bias corrections) are computed by the host.
#pragma once

#include <cmath>
#include <cstdint>

#include <ddl/core/kernel_list.hpp>
#include <ddl/core/macros.hpp>

namespace ddl::kernels {

// SGD as PyTorch's torch.optim.SGD (dampening 0): g += wd * p;
// v = momentum * v + g; Nesterov steps along g + momentum * v, plain
// momentum along v. `velocity` is null when momentum is 0 (no state).
struct SgdUpdate {
  float* param;
  const float* grad;
  float* velocity;
  float lr;
  float momentum;
  float weight_decay;
  bool nesterov;
  DDL_HOST_DEVICE void operator()(std::int64_t i) const {
    float g = grad[i] + weight_decay * param[i];
    if (velocity != nullptr) {
      const float v = momentum * velocity[i] + g;
      velocity[i] = v;
      g = nesterov ? g + momentum * v : v;
    }
    param[i] -= lr * g;
  }
};

// Adadelta (Zeiler 2012) as Keras / TF's ApplyAdadelta: epsilon sits inside
// both square roots, and lr scales the step (Keras default 1.0).
struct AdadeltaUpdate {
  float* param;
  const float* grad;
  float* accum_grad;   // running mean of g^2
  float* accum_delta;  // running mean of delta^2
  float lr;
  float rho;
  float epsilon;
  float weight_decay;
  DDL_HOST_DEVICE void operator()(std::int64_t i) const {
    const float g = grad[i] + weight_decay * param[i];
    const float ag = rho * accum_grad[i] + (1.0f - rho) * g * g;
    accum_grad[i] = ag;
    const float delta = sqrtf(accum_delta[i] + epsilon) / sqrtf(ag + epsilon) * g;
    accum_delta[i] = rho * accum_delta[i] + (1.0f - rho) * delta * delta;
    param[i] -= lr * delta;
  }
};

// Adagrad (Duchi et al. 2011) as PyTorch: sum += g^2; p -= lr g / (sqrt(sum) + eps).
struct AdagradUpdate {
  float* param;
  const float* grad;
  float* sum_squares;
  float lr;
  float epsilon;
  float weight_decay;
  DDL_HOST_DEVICE void operator()(std::int64_t i) const {
    const float g = grad[i] + weight_decay * param[i];
    const float s = sum_squares[i] + g * g;
    sum_squares[i] = s;
    param[i] -= lr * g / (sqrtf(s) + epsilon);
  }
};

// Adam (Kingma & Ba 2015) as PyTorch: p -= (lr / (1 - b1^t)) m / (sqrt(v) /
// sqrt(1 - b2^t) + eps). `step_size` = lr / (1 - b1^t) and
// `inv_sqrt_bias2` = 1 / sqrt(1 - b2^t) come from the host.
struct AdamUpdate {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  float beta1;
  float beta2;
  float epsilon;
  float weight_decay;
  float step_size;
  float inv_sqrt_bias2;
  DDL_HOST_DEVICE void operator()(std::int64_t i) const {
    const float g = grad[i] + weight_decay * param[i];
    const float m = beta1 * exp_avg[i] + (1.0f - beta1) * g;
    const float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] -= step_size * m / (sqrtf(v) * inv_sqrt_bias2 + epsilon);
  }
};

}  // namespace ddl::kernels

// Every optimizer kernel (core/kernel_list.hpp): instantiated for CUDA by
// optim/cuda/kernels_cuda.cu, marked for backend::launch's check below.
#define DDL_OPTIM_KERNELS(X) X(SgdUpdate) X(AdadeltaUpdate) X(AdagradUpdate) X(AdamUpdate)

namespace ddl::kernels {
DDL_OPTIM_KERNELS(DDL_LIST_KERNEL)
}  // namespace ddl::kernels
