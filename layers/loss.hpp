// Losses, reduced as PyTorch's `reduction` says (the mean by default).
//   cross_entropy: softmax cross-entropy fused with log-softmax, from raw
//     logits [N, C] and integer labels [N] (int32 or int64) or one-hot /
//     probability targets [N, C]; one value per sample. Each row is shifted
//     by its max, so logits of +-1e4 give finite losses and gradients.
//     Spatial logits [N, C, d1, ..., dk] (a segmentation network's, k >= 1)
//     take labels [N, d1, ..., dk] or targets shaped like the logits, with
//     one value per position, as PyTorch's cross_entropy.
//   mse: (prediction - target)^2, mae: |prediction - target|, one value per
//     element.
// Gaps against PyTorch's cross_entropy: no class weights, ignore_index or
// label_smoothing.
#pragma once

#include <cstdint>

#include <ddl/core/tensor.hpp>

namespace ddl::layers {

// What a loss returns from its per-sample (cross_entropy) or per-element
// (mse, mae) values: their mean (a scalar), their sum (a scalar), or the
// values themselves (None: shape [N] for cross_entropy, [N, d1, ..., dk]
// for spatial logits, the prediction's shape for mse and mae), e.g. to
// weight samples before reducing. Mean over spatial logits divides by
// N·d1···dk, every position counting alike.
enum class Reduction { Mean, Sum, None };

namespace loss_detail {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction);
Tensor mse_loss(const Tensor& prediction, const Tensor& target, Reduction reduction);
Tensor mae_loss(const Tensor& prediction, const Tensor& target, Reduction reduction);

// A loss as a function object, callable as loss(input, target) or
// loss(input, target, reduction). A function with a defaulted third
// parameter would not convert to a two-argument callable such as the
// Trainer's optim::LossFunction; this does.
template <Tensor (*Loss)(const Tensor&, const Tensor&, Reduction)>
struct LossFunction {
  Tensor operator()(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean) const {
    return Loss(input, target, reduction);
  }
};

}  // namespace loss_detail

// cross_entropy(logits, targets, reduction = Mean), and likewise mse_loss and
// mae_loss(prediction, target, reduction = Mean).
inline constexpr loss_detail::LossFunction<&loss_detail::cross_entropy> cross_entropy{};
inline constexpr loss_detail::LossFunction<&loss_detail::mse_loss> mse_loss{};
inline constexpr loss_detail::LossFunction<&loss_detail::mae_loss> mae_loss{};

}  // namespace ddl::layers
