#include <ddl/core/packed_weights.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <ddl/core/check.hpp>

namespace ddl {
namespace {

thread_local PackedWeights* innermost = nullptr;

bool packable(const Tensor& weight) {
  return weight.defined() && weight.dim() == 2 && weight.dtype() == DType::Float32 &&
         weight.device().type() == DeviceType::CPU && weight.numel() > 0;
}

}  // namespace

// The copies the last scope closed on this thread made, their memory kept
// for the next scope: what it will pack, and where.
thread_local std::vector<PackedWeights::Copy> PackedWeights::last_scope_;

PackedWeights::PackedWeights(const std::vector<Tensor>& weights) : enclosing_(innermost) {
  std::copy_if(weights.begin(), weights.end(), std::back_inserter(weights_), packable);
  innermost = this;
}

PackedWeights::~PackedWeights() {
  // Closed out of order, the list of open scopes would point at a dead one.
  if (innermost != this) {
    std::fputs("ddl: PackedWeights scopes must close in the reverse order they opened, on their own thread\n", stderr);
    std::abort();
  }
  innermost = enclosing_;
  last_scope_ = std::move(copies_);
}

std::size_t PackedWeights::bytes() const {
  std::size_t total = 0;
  for (const Copy& copy : copies_) total += copy.bytes;
  return total;
}

const Tensor* PackedWeights::weight_at(const float* data) const {
  const auto found = std::find_if(weights_.begin(), weights_.end(),
                                  [&](const Tensor& weight) { return weight.data<float>() == data; });
  return found == weights_.end() ? nullptr : &*found;
}

PackedWeights* PackedWeights::holding(const float* data) {
  for (PackedWeights* scope = innermost; scope != nullptr; scope = scope->enclosing_) {
    if (scope->weight_at(data) != nullptr) return scope;
  }
  return nullptr;
}

const void* PackedWeights::packed(const float* data, bool transposed, const std::string& layout, std::size_t bytes,
                                  std::function<void(void*)> pack) {
  const auto same = [&](const Copy& copy) {
    return copy.weight == data && copy.transposed == transposed && copy.layout == layout;
  };
  if (const auto found = std::find_if(copies_.begin(), copies_.end(), same); found != copies_.end()) {
    return found->memory.get();
  }
  // The last scope's copy of this weight, else any of its buffers of the size.
  auto reusable = std::find_if(last_scope_.begin(), last_scope_.end(), same);
  if (reusable == last_scope_.end()) {
    reusable =
        std::find_if(last_scope_.begin(), last_scope_.end(), [&](const Copy& copy) { return copy.bytes == bytes; });
  }
  Memory memory(nullptr, std::free);
  if (reusable != last_scope_.end()) {
    memory = std::move(reusable->memory);
    last_scope_.erase(reusable);
  } else {
    constexpr std::size_t kAlignment = 64;  // a cache line, as AVX-512 loads like
    memory.reset(std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment));
    DDL_CHECK(memory != nullptr, "PackedWeights: out of memory packing a weight into {} bytes", bytes);
  }
  pack(memory.get());
  const Tensor* weight = weight_at(data);
  DDL_CHECK(weight != nullptr, "PackedWeights: no weight of this scope is at {}", static_cast<const void*>(data));
  copies_.push_back({data, weight->shape(), transposed, layout, std::move(memory), bytes, std::move(pack)});
  return copies_.back().memory.get();
}

// The same weight, or at least one of its shape (a weight freed and another
// made at its address): the packing reads only its own extent.
bool PackedWeights::holds(const Copy& copy) const {
  const Tensor* weight = weight_at(copy.weight);
  return weight != nullptr && weight->shape() == copy.shape;
}

bool PackedWeights::ahead() const {
  return std::any_of(last_scope_.begin(), last_scope_.end(), [this](const Copy& copy) { return holds(copy); });
}

void PackedWeights::pack_ahead(const std::function<bool()>& done) {
  for (auto copy = last_scope_.begin(); copy != last_scope_.end() && !(done && done());) {
    if (holds(*copy)) {
      copy->pack(copy->memory.get());
      copies_.push_back(std::move(*copy));
      copy = last_scope_.erase(copy);
    } else {
      ++copy;
    }
  }
}

}  // namespace ddl
