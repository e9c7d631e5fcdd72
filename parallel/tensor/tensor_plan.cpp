// plan_tensor_parallel and build_tensor_parallel (see tensor_plan.hpp).
#include <ddl/parallel/tensor/tensor_plan.hpp>

#include <cstdint>

#include <fmt/format.h>

#include <ddl/core/check.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/residual.hpp>
#include <ddl/parallel/tensor/parallel_conv2d.hpp>
#include <ddl/parallel/tensor/parallel_dense.hpp>
#include <ddl/parallel/tensor/sharded_batchnorm2d.hpp>
#include <ddl/parallel/tensor/sharded_dropout.hpp>

namespace ddl::parallel {
namespace {

using Layers = std::vector<std::pair<std::string, std::shared_ptr<layers::Module>>>;

// What a split activation is split along: a Dense layer's output features
// (its last dim) or a convolution's channels (dim 1).
enum class Axis { features, channels };

// The features or channels a layer splits along `axis` as a column layer
// (out) and as a row layer (in); none for a layer that is neither.
struct Splittable {
  Axis axis;
  std::int64_t in, out;
};

std::optional<Splittable> splittable(const layers::Module& layer) {
  if (const auto* dense = dynamic_cast<const layers::Dense*>(&layer)) {
    return Splittable{Axis::features, dense->weight().size(0), dense->weight().size(1)};
  }
  if (const auto* conv = dynamic_cast<const layers::Conv2d*>(&layer)) {
    return Splittable{Axis::channels, conv->weight().size(1), conv->weight().size(0)};
  }
  return std::nullopt;
}

// The children of a Sequential (or of a Residual's body) with shared ownership.
const Layers* sequence_of(const layers::Module& module) {
  return dynamic_cast<const layers::Sequential*>(&module) != nullptr ? &module.children() : nullptr;
}

// What the planner needs of a layer, without its weights: the planner
// builds each layer alone, reads this and drops it, so a rank never holds
// more than one whole layer.
struct LayerFacts {
  std::string name, type;
  std::optional<Splittable> split;
  bool residual = false;             // its body (a Sequential) in `children`
  std::vector<LayerFacts> children;  // a Sequential's, or a Residual's body's
};

LayerFacts facts_of(const std::string& name, const layers::Module& layer) {
  LayerFacts facts{name, layer.type_name(), splittable(layer), false, {}};
  const layers::Module* sequence = &layer;
  if (const auto* residual = dynamic_cast<const layers::Residual*>(&layer)) {
    facts.residual = true;
    sequence = &residual->body();
  }
  if (const Layers* children = sequence_of(*sequence)) {
    for (const auto& [child_name, child] : *children) facts.children.push_back(facts_of(child_name, *child));
  }
  return facts;
}

// Whether a layer of `type` acts on each feature (channel) of an activation
// split along `axis` alone.
bool acts_on_each(const std::string& type, Axis axis) {
  if (type == "ReLU" || type == "Tanh" || type == "Sigmoid" || type == "Dropout") return true;
  return axis == Axis::channels && (type == "BatchNorm2d" || type == "MaxPool2d" || type == "AvgPool2d");
}

void plan_sequence(const std::vector<LayerFacts>& sequence, const std::string& prefix, int ranks, TensorPlan& plan) {
  std::optional<Axis> sharded;
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    const LayerFacts& layer = sequence[i];
    const std::string path = prefix + layer.name;
    if (sharded) {
      // The partner search below let only layers acting on each part through to the row layer.
      plan.roles.emplace_back(path, layer.split ? TensorRole::row : TensorRole::sharded);
      if (layer.split) sharded.reset();
      continue;
    }
    if (!layer.children.empty()) {
      plan_sequence(layer.children, path + (layer.residual ? ".body." : "."), ranks, plan);
      continue;
    }
    if (!layer.split || layer.split->out < ranks) continue;
    std::size_t partner = i + 1;
    while (partner < sequence.size() && acts_on_each(sequence[partner].type, layer.split->axis)) ++partner;
    if (partner == sequence.size()) continue;
    const auto& row = sequence[partner].split;
    if (row && row->axis == layer.split->axis && row->in >= ranks) {
      plan.roles.emplace_back(path, TensorRole::column);
      sharded = layer.split->axis;
    }
  }
}

std::shared_ptr<layers::Module> split_layer(std::shared_ptr<layers::Module> layer, const std::string& path,
                                            const TensorPlan& plan, const std::shared_ptr<const TensorGroup>& group,
                                            Axis& axis, std::int64_t& count);

// A Sequential of `sequence`'s layers, each split where the plan says.
std::shared_ptr<layers::Sequential> split_sequence(const Layers& sequence, const std::string& prefix,
                                                   const TensorPlan& plan,
                                                   const std::shared_ptr<const TensorGroup>& group, Axis& axis,
                                                   std::int64_t& count) {
  auto rebuilt = std::make_shared<layers::Sequential>();
  for (const auto& [name, child] : sequence)
    rebuilt->add(name, split_layer(child, prefix + name, plan, group, axis, count));
  return rebuilt;
}

// This rank's version of `layer` at `path`: its slice where the plan splits
// it, a Residual or Sequential rebuilt around split children (the ones the
// planner walked), else itself. `axis` and `count` carry the sharded
// activation's split from its column layer to the layers after it.
std::shared_ptr<layers::Module> split_layer(std::shared_ptr<layers::Module> layer, const std::string& path,
                                            const TensorPlan& plan, const std::shared_ptr<const TensorGroup>& group,
                                            Axis& axis, std::int64_t& count) {
  const auto role = plan.role_of(path);
  if (!role) {
    if (const auto* residual = dynamic_cast<const layers::Residual*>(layer.get())) {
      const Layers* body = sequence_of(residual->body());
      if (body == nullptr) return layer;
      std::shared_ptr<layers::Module> shortcut;
      for (const auto& [name, child] : layer->children()) {
        if (name == "shortcut") shortcut = child;
      }
      return std::make_shared<layers::Residual>(split_sequence(*body, path + ".body.", plan, group, axis, count),
                                                shortcut, residual->activation());
    }
    if (const Layers* nested = sequence_of(*layer))
      return split_sequence(*nested, path + ".", plan, group, axis, count);
    return layer;
  }
  const auto* dense = dynamic_cast<const layers::Dense*>(layer.get());
  const auto* conv = dynamic_cast<const layers::Conv2d*>(layer.get());
  DDL_CHECK(*role == TensorRole::sharded || dense != nullptr || conv != nullptr,
            "build_tensor_parallel: the plan splits layer {}, a {}: it was made for another model", path,
            layer->describe());
  switch (*role) {
    case TensorRole::column:
      if (dense != nullptr) {
        axis = Axis::features;
        count = dense->weight().size(1);
        return std::make_shared<ColumnParallelDense>(*dense, group);
      }
      axis = Axis::channels;
      count = conv->weight().size(0);
      return std::make_shared<ColumnParallelConv2d>(*conv, group);
    case TensorRole::row:
      if (dense != nullptr) return std::make_shared<RowParallelDense>(*dense, group);
      return std::make_shared<RowParallelConv2d>(*conv, group);
    case TensorRole::sharded:
      if (const auto* dropout = dynamic_cast<const layers::Dropout*>(layer.get())) {
        return std::make_shared<ShardedDropout>(*dropout, axis == Axis::features ? -1 : 1, count, group);
      }
      if (const auto* norm = dynamic_cast<const layers::BatchNorm2d*>(layer.get())) {
        return std::make_shared<ShardedBatchNorm2d>(*norm, group);
      }
      return layer;
  }
  return layer;
}

}  // namespace

std::string TensorPlan::describe() const {
  std::string pairs;
  for (const auto& [path, role] : roles) {
    if (role == TensorRole::column) pairs += fmt::format("{}column {}", pairs.empty() ? "" : "; ", path);
    if (role == TensorRole::row) pairs += fmt::format(" + row {}", path);
  }
  return pairs;
}

std::optional<TensorRole> TensorPlan::role_of(const std::string& path) const {
  for (const auto& [at, role] : roles) {
    if (at == path) return role;
  }
  return std::nullopt;
}

std::string TensorPlan::pair_across(std::size_t layer) const {
  // Only the top level's pairs (paths without a dot) span its layers.
  std::optional<std::size_t> column;
  for (const auto& [path, role] : roles) {
    if (path.find('.') != std::string::npos) continue;
    const auto at = static_cast<std::size_t>(std::stoul(path));
    if (role == TensorRole::column) column = at;
    if (role == TensorRole::row && column) {
      if (*column < layer && layer <= at) return fmt::format("column {} + row {}", *column, at);
      column.reset();
    }
  }
  return {};
}

TensorPlan plan_tensor_parallel(const layers::LayerList& layers, int ranks) {
  DDL_CHECK(ranks >= 1, "tensor parallelism: a tensor group needs at least 1 rank, got {}", ranks);
  std::vector<LayerFacts> facts;
  std::string described;
  Generator scratch(0);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto layer = layers.build_layer(i, &scratch);
    facts.push_back(facts_of(std::to_string(i), *layer));
    described += fmt::format("{}{} {}", i == 0 ? "" : ", ", i, layer->describe());
  }
  TensorPlan plan{ranks, layers.size(), {}};
  plan_sequence(facts, "", ranks, plan);
  DDL_CHECK(!plan.roles.empty(),
            "tensor parallelism over {} ranks: no Dense or Conv2d layer with at least {} outputs is followed (past "
            "layers that act on each feature or channel alone) by one of its kind with at least {} inputs, so no "
            "layer can be split; the layers are {}",
            ranks, ranks, ranks, described);
  return plan;
}

std::shared_ptr<layers::Sequential> build_tensor_parallel(const layers::LayerList& layers, const TensorPlan& plan,
                                                          std::shared_ptr<const TensorGroup> group,
                                                          Generator* generator) {
  DDL_CHECK(layers.size() > 0, "build_tensor_parallel: the list has no layers");
  return build_tensor_parallel(layers, plan, std::move(group), generator, 0, layers.size() - 1);
}

std::shared_ptr<layers::Sequential> build_tensor_parallel(const layers::LayerList& layers, const TensorPlan& plan,
                                                          std::shared_ptr<const TensorGroup> group,
                                                          Generator* generator, std::size_t first, std::size_t last) {
  DDL_CHECK(plan.layers == layers.size() && plan.ranks == group->size(),
            "build_tensor_parallel: a plan of {} layers for {} ranks does not fit {} layers and a tensor group of {}",
            plan.layers, plan.ranks, layers.size(), group->size());
  DDL_CHECK(first <= last && last < layers.size(),
            "build_tensor_parallel: layers {}-{} are not a range of the {} layers", first, last, layers.size());
  for (const std::size_t edge : {first, last + 1}) {
    const std::string across = edge < layers.size() ? plan.pair_across(edge) : std::string();
    DDL_CHECK(across.empty(), "build_tensor_parallel: layers {}-{} cut the pair {}: a sharded activation at their {}",
              first, last, across, edge == first ? "input" : "output");
  }
  for (std::size_t i = 0; i < first; ++i) layers.build_layer(i, generator);  // its draws only
  auto model = std::make_shared<layers::Sequential>();
  Axis axis = Axis::features;
  std::int64_t count = 0;
  for (std::size_t i = first; i <= last; ++i) {
    const std::string name = std::to_string(i);
    model->add(name, split_layer(layers.build_layer(i, generator), name, plan, group, axis, count));
  }
  return model;
}

}  // namespace ddl::parallel
