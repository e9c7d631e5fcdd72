// A tensor-parallel rank's part of a checkpoint (see tensor_state.hpp).
#include <ddl/parallel/tensor/tensor_state.hpp>

#include <map>
#include <string>
#include <vector>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/layers/named_tensors.hpp>
#include <ddl/parallel/tensor/split_layer.hpp>

namespace ddl::parallel {
namespace {

using Splits = std::map<std::string, SplitLayer::Split>;

constexpr int kStateTag = 0x3200;

void collect_splits(const layers::Module& module, const std::string& prefix, Splits& splits) {
  if (const auto* split = dynamic_cast<const SplitLayer*>(&module)) {
    // A split layer has no children: its named tensors are its own.
    for (const auto& [name, tensor] : module.state_dict()) {
      if (const auto how = split->split_of(name)) splits.emplace(prefix + name, *how);
    }
  }
  for (const auto& [name, child] : module.children()) collect_splits(*child, prefix + name + ".", splits);
}

// Whether `entry` is shaped as `parameter` but for the split dim, where it
// may be the slice or the whole.
bool shaped_as(const Tensor& entry, const Tensor& parameter, int split_dim) {
  if (entry.dim() != parameter.dim()) return false;
  for (int d = 0; d < entry.dim(); ++d) {
    if (d != split_dim && entry.size(d) != parameter.size(d)) return false;
  }
  return true;
}

// How every entry of a checkpoint that is split is: the model's split
// parameters and buffers, and the optimizer's state of a split parameter
// ("<k>.<buffer>" of parameter k, shaped as it; a scalar beside it is whole).
struct SplitEntries {
  Splits model, optimizer;
};

SplitEntries split_entries(const layers::Module& model, const optim::TrainingState& state) {
  SplitEntries entries;
  collect_splits(model, "", entries.model);
  const std::vector<layers::NamedTensor> parameters = model.named_parameters();
  for (const auto& [name, tensor] : state.optimizer) {
    const auto k = layers::leading_index(name);
    if (!k || *k < 0 || *k >= static_cast<std::int64_t>(parameters.size())) continue;
    const auto& [parameter, value] = parameters[static_cast<std::size_t>(*k)];
    const auto split = entries.model.find(parameter);
    if (split != entries.model.end() && shaped_as(tensor, value, split->second.dim)) {
      entries.optimizer.emplace(name, split->second);
    }
  }
  return entries;
}

// The shape of rank t's slice, from this rank's.
Shape slice_shape(const Tensor& mine, const SplitLayer::Split& split, const TensorGroup& group, int t) {
  std::vector<std::int64_t> dims = mine.shape().to_vector();
  dims[static_cast<std::size_t>(split.dim)] = chunk_range(split.whole, group.size(), t).size();
  return Shape(dims);
}

void gather_entries(const TensorGroup& group, const Splits& splits,
                    std::vector<std::pair<std::string, Tensor>>& entries) {
  const Communicator& comm = group.communicator();
  for (auto& [name, tensor] : entries) {
    const auto split = splits.find(name);
    if (split == splits.end()) continue;
    if (group.rank() != 0) {
      comm.send(tensor, 0, kStateTag);
      continue;
    }
    std::vector<Tensor> slices{tensor};
    for (int t = 1; t < group.size(); ++t) {
      Tensor slice =
          Tensor::empty(slice_shape(tensor, split->second, group, t), {tensor.dtype(), tensor.device(), false});
      comm.recv(slice, t, kStateTag);
      slices.push_back(std::move(slice));
    }
    tensor = concat(slices, split->second.dim);
  }
}

void select_entries(const TensorGroup& group, const Splits& splits,
                    std::vector<std::pair<std::string, Tensor>>& entries, const char* what) {
  for (auto& [name, tensor] : entries) {
    const auto split = splits.find(name);
    if (split == splits.end()) continue;
    const auto [dim, whole] = split->second;
    DDL_CHECK(tensor.dim() > dim && tensor.size(dim) == whole,
              "tensor parallelism: the checkpoint's {} entry '{}' has shape {}, but this model's layer splits {} along "
              "dim {} over {} ranks",
              what, name, tensor.shape(), whole, dim, group.size());
    const ChunkRange part = group.part(whole);
    tensor = slice(tensor, part.begin, part.end, dim);
  }
}

}  // namespace

void gather_tensor_state(const TensorGroup& group, const layers::Module& model, optim::TrainingState& state) {
  const SplitEntries splits = split_entries(model, state);
  gather_entries(group, splits.model, state.model);
  gather_entries(group, splits.optimizer, state.optimizer);
}

void select_tensor_state(const TensorGroup& group, const layers::Module& model, optim::TrainingState& state) {
  const SplitEntries splits = split_entries(model, state);
  select_entries(group, splits.model, state.model, "model");
  select_entries(group, splits.optimizer, state.optimizer, "optimizer");
}

}  // namespace ddl::parallel
