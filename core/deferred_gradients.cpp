#include <ddl/core/deferred_gradients.hpp>

#include <algorithm>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/ops/helpers.hpp>

namespace ddl::autograd {
namespace {

bool same_owner(const std::weak_ptr<TensorImpl>& a, const std::shared_ptr<TensorImpl>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

// Adds xᵀ·gradient, the product matmul's backward computes, into the
// weight's .grad. With a .grad already there (an earlier part's, or a
// gradient bucket's view) the GEMM adds into it directly: M parts then
// write the weight-sized gradient M times, where a product of their own
// would each also be written whole and read back to be added. Else the
// product becomes .grad through the weight's accumulator.
void add_into_grad(const std::shared_ptr<TensorImpl>& weight, const Tensor& x, const Tensor& gradient,
                   Node& accumulator) {
  constexpr const char* kName = "deferred weight gradient";
  if (weight->grad) {
    ops_detail::add_weight_gradient(weight, Tensor(weight->grad), x, gradient, kName);
  } else {
    accumulator.backward(ops_detail::gemm(x, true, gradient, false, kName), {});
  }
}

// One tensor of the rows of every part, in order.
Tensor joined(const std::vector<Tensor>& parts) { return parts.size() == 1 ? parts.front() : concat(parts); }

// A gradient computed for `leaf`, handed to its accumulator (added into
// .grad, hooks run); nothing if it no longer requires grad.
void accumulate(const std::shared_ptr<TensorImpl>& leaf, const Tensor& gradient) {
  if (const std::shared_ptr<Node> accumulator = edge_to(Tensor(leaf))) accumulator->backward(gradient, {});
}

}  // namespace

DeferredWeightGradients::DeferredWeightGradients(const std::vector<Tensor>& weights) {
  for (const Tensor& weight : weights) {
    if (weight.defined() && weight.dim() >= 2) entries_.push_back({.weight = weight.impl()});
  }
}

void DeferredWeightGradients::backward_inputs(const Tensor& root, const Tensor& gradient, std::size_t part,
                                              bool retain_graph) {
  run_backward(root, gradient, retain_graph, BackwardPass{.deferred = this, .part = part});
}

bool DeferredWeightGradients::keep(const std::shared_ptr<TensorImpl>& weight, std::size_t part, const Tensor& x,
                                   const Tensor& gradient, Product product,
                                   std::vector<std::weak_ptr<TensorImpl>> companions) {
  const auto entry =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return same_owner(e.weight, weight); });
  if (entry == entries_.end()) return false;
  entry->rows.push_back({part, x, gradient});
  entry->product = std::move(product);  // every pass's alike: the op's, for any rows
  entry->companions = std::move(companions);
  return true;
}

std::size_t DeferredWeightGradients::weights() const {
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.rows.empty(); }));
}

std::size_t DeferredWeightGradients::bytes() const {
  std::size_t total = 0;
  for (const Entry& entry : entries_) {
    for (const Rows& rows : entry.rows) total += rows.x.nbytes() + rows.gradient.nbytes();
  }
  return total;
}

void DeferredWeightGradients::backward_weights() {
  compute([](std::size_t) { return true; });
}

void DeferredWeightGradients::backward_weights(const std::vector<std::size_t>& parts) {
  compute([&](std::size_t part) { return std::find(parts.begin(), parts.end(), part) != parts.end(); });
}

template <class Selected>
void DeferredWeightGradients::compute(Selected selected) {
  const NoGradGuard no_grad;
  // Last weight first, as backward reaches a model's layers: gradient
  // buckets, made in that order, then fill one after another.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    Entry& entry = *it;
    // The selected rows to the front, in part order; the others stay.
    const auto chosen_end = std::stable_partition(entry.rows.begin(), entry.rows.end(),
                                                  [&](const Rows& rows) { return selected(rows.part); });
    if (chosen_end == entry.rows.begin()) continue;
    std::stable_sort(entry.rows.begin(), chosen_end, [](const Rows& a, const Rows& b) { return a.part < b.part; });
    const std::shared_ptr<TensorImpl> weight = entry.weight.lock();
    if (weight) {  // else nobody will read its gradient
      std::vector<Tensor> xs, gradients;
      for (auto rows = entry.rows.begin(); rows != chosen_end; ++rows) {
        xs.push_back(rows->x);
        gradients.push_back(rows->gradient);
      }
      if (entry.product) {
        const std::vector<Tensor> computed = entry.product(joined(xs), joined(gradients));
        accumulate(weight, computed.front());
        for (std::size_t c = 0; c < entry.companions.size(); ++c) {
          if (const std::shared_ptr<TensorImpl> companion = entry.companions[c].lock()) {
            accumulate(companion, computed[c + 1]);
          }
        }
      } else if (const std::shared_ptr<Node> accumulator = edge_to(Tensor(weight))) {  // unless it stopped requiring grad
        add_into_grad(weight, joined(xs), joined(gradients), *accumulator);
      }
    }
    entry.rows.erase(entry.rows.begin(), chosen_end);
  }
}

}  // namespace ddl::autograd
