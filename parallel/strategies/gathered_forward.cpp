// ZeRO stage 3's forward pass (see gathered_forward.hpp).
#include <ddl/parallel/strategies/gathered_forward.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include <ddl/core/autograd.hpp>
#include <ddl/core/check.hpp>
#include <ddl/layers/sequential.hpp>

namespace ddl::parallel {
namespace {

// `x` unchanged, and in backward bucket b gathered before its gradient
// flows on into the layers that produced it, and `next` (the bucket that
// backward needs after it, if any) asked for ahead.
Tensor gather_before_backward(const Tensor& x, const std::weak_ptr<ShardedState>& state, std::size_t b,
                              std::optional<std::size_t> next) {
  if (!autograd::needs_grad({&x})) return x;
  Tensor y = x.detach();
  autograd::record("GatherParametersBackward", {&x}, y, [state, b, next](const Tensor& grad) {
    if (const auto shards = state.lock()) {
      shards->gather(b);
      if (next) shards->prefetch(*next);
    }
    return std::vector<Tensor>{grad};
  });
  return y;
}

// The bucket after `b` in `order`, if any.
std::optional<std::size_t> after(const std::vector<std::size_t>& order, std::size_t b) {
  const auto at = std::find(order.begin(), order.end(), b);
  if (at == order.end() || at + 1 == order.end()) return std::nullopt;
  return *(at + 1);
}

}  // namespace

Tensor gathered_forward(layers::Module& model, const Tensor& input, const std::shared_ptr<ShardedState>& state,
                        bool for_backward) {
  auto* sequential = dynamic_cast<layers::Sequential*>(&model);
  DDL_CHECK(sequential != nullptr,
            "sharding parameters: the model must be a Sequential, whose layers its parameters are gathered for; "
            "got a {}",
            model.type_name());
  const auto& layers = sequential->children();
  // uses[i]: the buckets layer i's parameters lie in; last[b]: the last layer using bucket b.
  std::vector<std::vector<std::size_t>> uses(layers.size());
  std::map<std::size_t, std::size_t> last;
  std::vector<std::size_t> forward_order;  // the buckets by first use
  for (std::size_t i = 0; i < layers.size(); ++i) {
    for (const auto& [name, parameter] : layers[i].second->named_parameters()) {
      const std::optional<std::size_t> b = state->bucket_of(parameter);
      DDL_CHECK(b.has_value(), "sharding parameters: layer {}'s parameter '{}' is in no gradient bucket",
                layers[i].first, name);
      if (std::find(uses[i].begin(), uses[i].end(), *b) == uses[i].end()) uses[i].push_back(*b);
      if (std::find(forward_order.begin(), forward_order.end(), *b) == forward_order.end()) forward_order.push_back(*b);
      last[*b] = i;
    }
  }
  const std::vector<std::size_t> backward_order(forward_order.rbegin(), forward_order.rend());
  Tensor x = input;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    for (const std::size_t b : uses[i]) {
      state->gather(b);
      if (const auto next = after(forward_order, b)) state->prefetch(*next);
    }
    x = (*layers[i].second)(x);
    for (const std::size_t b : uses[i]) {
      if (last[b] != i) continue;
      if (for_backward) x = gather_before_backward(x, state, b, after(backward_order, b));
      state->release(b);
    }
  }
  return x;
}

}  // namespace ddl::parallel
