#include <ddl/core/deferred_gradients.hpp>

#include <algorithm>
#include <utility>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/ops/helpers.hpp>

namespace ddl::autograd {
namespace {

// The deferral this thread's backward passes record into, if any.
thread_local DeferredWeightGradients* recording = nullptr;

bool same_owner(const std::weak_ptr<TensorImpl>& a, const std::shared_ptr<TensorImpl>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

// One tensor of the rows of every part, in order.
Tensor joined(const std::vector<Tensor>& parts) { return parts.size() == 1 ? parts.front() : concat(parts); }

}  // namespace

DeferredWeightGradients::Recording::Recording(DeferredWeightGradients& deferred, std::size_t part) {
  DDL_CHECK(recording == nullptr,
            "DeferredWeightGradients: this thread is already recording (one Recording per thread at a time)");
  deferred.part_ = part;
  recording = &deferred;
}

DeferredWeightGradients::Recording::~Recording() { recording = nullptr; }

bool DeferredWeightGradients::defer(const std::shared_ptr<TensorImpl>& weight, const Tensor& x,
                                    const Tensor& gradient) {
  DeferredWeightGradients* self = recording;
  if (self == nullptr) return false;
  auto entry = std::find_if(self->entries_.begin(), self->entries_.end(),
                            [&](const Entry& e) { return same_owner(e.weight, weight); });
  if (entry == self->entries_.end()) entry = self->entries_.insert(self->entries_.end(), Entry{weight, {}});
  entry->rows.push_back({self->part_, x, gradient});
  return true;
}

std::size_t DeferredWeightGradients::bytes() const {
  std::size_t total = 0;
  for (const Entry& entry : entries_) {
    for (const Rows& rows : entry.rows) total += rows.x.nbytes() + rows.gradient.nbytes();
  }
  return total;
}

void DeferredWeightGradients::compute() {
  const NoGradGuard no_grad;
  std::vector<Entry> entries = std::exchange(entries_, {});
  for (Entry& entry : entries) {
    const std::shared_ptr<TensorImpl> weight = entry.weight.lock();
    if (!weight) continue;  // nobody will read its gradient
    std::stable_sort(entry.rows.begin(), entry.rows.end(),
                     [](const Rows& a, const Rows& b) { return a.part < b.part; });
    std::vector<Tensor> xs, gradients;
    for (const Rows& rows : entry.rows) {
      xs.push_back(rows.x);
      gradients.push_back(rows.gradient);
    }
    entry.rows.clear();
    // The product matmul's backward computes, over every part's rows.
    const Tensor gradient = ops_detail::gemm(joined(xs), true, joined(gradients), false, "deferred weight gradient");
    xs.clear();
    gradients.clear();
    // Its accumulator, unless it stopped requiring grad since.
    if (const std::shared_ptr<Node> accumulator = edge_to(Tensor(weight))) accumulator->backward(gradient);
  }
}

}  // namespace ddl::autograd
