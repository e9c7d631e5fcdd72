#include <ddl/core/autograd.hpp>
#include <ddl/core/backend.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/op_checks.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/layer_kernels.hpp>
#include <ddl/layers/loss.hpp>

#include <algorithm>

namespace ddl::layers {

namespace {

// Labels must name a class; checked on the host (a copy of N integers) so a
// bad label is an error naming it, never an out-of-bounds read on a device.
template <class Label>
void check_labels(const Tensor& labels, std::int64_t classes) {
  const std::vector<Label> values = labels.to_vector<Label>();
  const auto bad = std::find_if(values.begin(), values.end(),
                                [classes](Label v) { return v < 0 || static_cast<std::int64_t>(v) >= classes; });
  DDL_CHECK(bad == values.end(), "cross_entropy: label {} at index {} is out of range for {} classes", *bad,
            bad - values.begin(), classes);
}

Tensor reduce_loss(const Tensor& values, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean:
      return mean(values);
    case Reduction::Sum:
      return sum(values);
    case Reduction::None:
      break;
  }
  return values;
}

template <class Label>
Tensor cross_entropy_with_labels(const Tensor& logits, const Tensor& labels, Reduction reduction) {
  const std::int64_t rows = logits.size(0), classes = logits.size(1);
  check_labels<Label>(labels, classes);
  Tensor losses = empty_float({rows}, logits.device());
  backend::launch(logits.device(), rows,
                  kernels::CrossEntropyRows<Label>{logits.data<float>(), labels.data<Label>(), losses.data<float>(),
                                                   classes});
  Tensor loss;
  {
    const NoGradGuard no_grad;  // the fused node below is the whole backward
    loss = reduce_loss(losses, reduction);
  }
  if (autograd::needs_grad({&logits})) {
    const std::int64_t upstream_stride = reduction == Reduction::None ? 1 : 0;
    const float scale = reduction == Reduction::Mean ? 1.0f / static_cast<float>(rows) : 1.0f;
    autograd::record("CrossEntropyBackward", {&logits}, loss,
                     [logits = logits.detach(), labels, rows, classes, upstream_stride, scale](const Tensor& g) {
                       Tensor grad = empty_float(logits.shape(), logits.device());
                       backend::launch(logits.device(), rows,
                                       kernels::CrossEntropyGradRows<Label>{logits.data<float>(), labels.data<Label>(),
                                                                            g.data<float>(), upstream_stride,
                                                                            grad.data<float>(), classes, scale});
                       return std::vector{grad};
                     });
  }
  return loss;
}

Tensor cross_entropy_2d(const Tensor& logits, const Tensor& targets, Reduction reduction) {
  if (targets.dtype() == DType::Float32) {
    DDL_CHECK(targets.shape() == logits.shape(),
              "cross_entropy: one-hot targets of shape {} do not match logits of shape {}", targets.shape(),
              logits.shape());
    return reduce_loss(neg(sum(mul(targets, log_softmax(logits, 1)), 1)), reduction);
  }
  DDL_CHECK(targets.shape() == Shape{logits.size(0)},
            "cross_entropy: labels of shape {} do not match logits of shape {} (expected [{}])", targets.shape(),
            logits.shape(), logits.size(0));
  return targets.dtype() == DType::Int32 ? cross_entropy_with_labels<std::int32_t>(logits, targets, reduction)
                                         : cross_entropy_with_labels<std::int64_t>(logits, targets, reduction);
}

// Logits [N, C, d1, ..., dk], as PyTorch takes them: each of the N·d1···dk
// positions is one row of the 2-D loss, so the fused, max-shifted kernel
// serves them all. Moving C last is one differentiable transpose of [N, C, P]
// to [N, P, C]; one-hot targets [N, C, d1, ..., dk] move alike.
Tensor spatial_cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction) {
  const auto dims = logits.shape().to_vector();
  const std::int64_t samples = dims[0], classes = dims[1];
  const std::int64_t positions = logits.numel() / (samples * classes);
  std::vector<std::int64_t> per_position{samples};
  per_position.insert(per_position.end(), dims.begin() + 2, dims.end());
  const bool one_hot = targets.dtype() == DType::Float32;
  DDL_CHECK(one_hot ? targets.shape() == logits.shape() : targets.shape() == Shape(per_position),
            "cross_entropy: targets of shape {} do not fit logits of shape {} (expected {} labels {} or one-hot "
            "targets shaped like the logits)",
            targets.shape(), logits.shape(), targets.dtype(), Shape(per_position));
  const auto classes_last = [&](const Tensor& t) {
    return transpose(t.reshape({samples, classes, positions})).reshape({samples * positions, classes});
  };
  const Tensor rows = classes_last(logits);
  const Tensor losses =
      cross_entropy_2d(rows, one_hot ? classes_last(targets) : targets.reshape({samples * positions}), reduction);
  return reduction == Reduction::None ? losses.reshape(Shape(per_position)) : losses;
}

void check_same_shape(const Tensor& prediction, const Tensor& target, const char* name) {
  require_float(prediction, name);
  require_float(target, name);
  DDL_CHECK(prediction.shape() == target.shape(), "{}: prediction of shape {} and target of shape {} differ", name,
            prediction.shape(), target.shape());
}

}  // namespace

namespace loss_detail {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction) {
  require_float(logits, "cross_entropy");
  DDL_CHECK(logits.dim() >= 2 && logits.numel() > 0,
            "cross_entropy: expected logits [N, C] or [N, C, d1, ..., dk] with no empty dim, got {}", logits.shape());
  DDL_CHECK(targets.defined(), "cross_entropy: targets are undefined");
  require_same_device(logits, targets, "cross_entropy");
  return logits.dim() > 2 ? spatial_cross_entropy(logits, targets, reduction)
                         : cross_entropy_2d(logits, targets, reduction);
}

Tensor mse_loss(const Tensor& prediction, const Tensor& target, Reduction reduction) {
  check_same_shape(prediction, target, "mse_loss");
  return reduce_loss(pow(sub(prediction, target), 2.0f), reduction);
}

Tensor mae_loss(const Tensor& prediction, const Tensor& target, Reduction reduction) {
  check_same_shape(prediction, target, "mae_loss");
  return reduce_loss(abs(sub(prediction, target)), reduction);
}

}  // namespace loss_detail

}  // namespace ddl::layers
