// Softmax and log-softmax along one dim, each lane max-shifted so large
// logits (1e4) do not overflow; backward from the saved output alone.
#include <ddl/core/ops/helpers.hpp>

namespace ddl {

using namespace ops_detail;

namespace {

Tensor softmax_along(const Tensor& x, int dim, bool take_log, const char* name, const char* backward_name) {
  require_float(x, name);
  const int d = x.shape().normalize_dim(dim, name);
  const LaneView view = lanes_around(x.shape(), d);
  Tensor y = empty_float(x.shape(), x.device());
  if (x.numel() > 0) {  // an empty lane has no max to read
    backend::launch(x.device(), view.count,
                    kernels::SoftmaxLanes{x.data<float>(), y.data<float>(), view.lanes, take_log});
  }
  if (autograd::needs_grad({&x})) {
    autograd::record(backward_name, {&x}, y, [y = y.detach(), view, take_log](const Tensor& g) {
      Tensor grad_in = empty_float(y.shape(), y.device());
      backend::launch(y.device(), view.count,
                      kernels::SoftmaxGradLanes{y.data<float>(), g.data<float>(), grad_in.data<float>(), view.lanes,
                                                take_log});
      return std::vector{grad_in};
    });
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int dim) { return softmax_along(x, dim, false, "softmax", "SoftmaxBackward"); }

Tensor log_softmax(const Tensor& x, int dim) {
  return softmax_along(x, dim, true, "log_softmax", "LogSoftmaxBackward");
}

}  // namespace ddl
