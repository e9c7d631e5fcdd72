// plan_tensor_parallel and build_tensor_parallel (see tensor_plan.hpp).
#include <ddl/parallel/tensor/tensor_plan.hpp>

#include <cstdint>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/parallel/tensor/parallel_dense.hpp>
#include <ddl/parallel/tensor/sharded_dropout.hpp>

namespace ddl::parallel {
namespace {

enum class Kind { dense, elementwise, dropout, other };

struct LayerFacts {
  Kind kind = Kind::other;
  std::int64_t in = 0, out = 0;  // a Dense layer's features
};

LayerFacts facts_of(const layers::Module& layer) {
  if (const auto* dense = dynamic_cast<const layers::Dense*>(&layer)) {
    return {Kind::dense, dense->weight().size(0), dense->weight().size(1)};
  }
  if (dynamic_cast<const layers::Dropout*>(&layer) != nullptr) return {Kind::dropout};
  const std::string type = layer.type_name();
  if (type == "ReLU" || type == "Tanh" || type == "Sigmoid") return {Kind::elementwise};
  return {};
}

bool acts_per_element(Kind kind) { return kind == Kind::elementwise || kind == Kind::dropout; }

}  // namespace

std::string TensorPlan::describe() const {
  std::string pairs;
  for (std::size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] == TensorRole::column) pairs += fmt::format("{}column {}", pairs.empty() ? "" : "; ", i);
    if (roles[i] == TensorRole::row) pairs += fmt::format(" + row {}", i);
  }
  return pairs;
}

bool TensorPlan::splits_anything() const {
  for (const TensorRole role : roles) {
    if (role == TensorRole::column) return true;
  }
  return false;
}

TensorPlan plan_tensor_parallel(const layers::LayerList& layers, int ranks) {
  DDL_CHECK(ranks >= 1, "tensor parallelism: a tensor group needs at least 1 rank, got {}", ranks);
  std::vector<LayerFacts> facts;
  std::string kinds;
  Generator scratch(0);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto layer = layers.build_layer(i, &scratch);
    facts.push_back(facts_of(*layer));
    kinds += fmt::format("{}{} {}", i == 0 ? "" : ", ", i, layer->describe());
  }
  TensorPlan plan{ranks, std::vector<TensorRole>(facts.size(), TensorRole::whole)};
  bool sharded = false;
  for (std::size_t i = 0; i < facts.size(); ++i) {
    if (sharded) {
      // The partner search below let only elementwise layers through to the row layer.
      const bool row = facts[i].kind == Kind::dense;
      plan.roles[i] = row ? TensorRole::row : TensorRole::sharded;
      sharded = !row;
      continue;
    }
    if (facts[i].kind != Kind::dense || facts[i].out < ranks) continue;
    std::size_t partner = i + 1;
    while (partner < facts.size() && acts_per_element(facts[partner].kind)) ++partner;
    if (partner < facts.size() && facts[partner].kind == Kind::dense && facts[partner].in >= ranks) {
      plan.roles[i] = TensorRole::column;
      sharded = true;
    }
  }
  DDL_CHECK(plan.splits_anything(),
            "tensor parallelism over {} ranks: no Dense layer with at least {} output features is followed (past "
            "activations and dropout only) by a Dense layer with at least {} input features, so no layer can be "
            "split; the layers are {}",
            ranks, ranks, ranks, kinds);
  return plan;
}

std::shared_ptr<layers::Sequential> build_tensor_parallel(const layers::LayerList& layers, const TensorPlan& plan,
                                                          std::shared_ptr<const TensorGroup> group,
                                                          Generator* generator) {
  DDL_CHECK(plan.roles.size() == layers.size() && plan.ranks == group->size(),
            "build_tensor_parallel: a plan of {} layers for {} ranks does not fit {} layers and a tensor group of {}",
            plan.roles.size(), plan.ranks, layers.size(), group->size());
  auto model = std::make_shared<layers::Sequential>();
  std::int64_t features = 0;  // of the sharded activation
  for (std::size_t i = 0; i < layers.size(); ++i) {
    std::shared_ptr<layers::Module> layer = layers.build_layer(i, generator);
    switch (plan.roles[i]) {
      case TensorRole::whole:
        break;
      case TensorRole::column: {
        const auto& dense = dynamic_cast<const layers::Dense&>(*layer);
        features = dense.weight().size(1);
        layer = std::make_shared<ColumnParallelDense>(dense, group);
        break;
      }
      case TensorRole::row:
        layer = std::make_shared<RowParallelDense>(dynamic_cast<const layers::Dense&>(*layer), group);
        break;
      case TensorRole::sharded:
        if (const auto* dropout = dynamic_cast<const layers::Dropout*>(layer.get())) {
          layer = std::make_shared<ShardedDropout>(*dropout, -1, features, group);
        }
        break;
    }
    model->add(std::to_string(i), layer);
  }
  return model;
}

}  // namespace ddl::parallel
