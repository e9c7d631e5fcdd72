// A pipeline stage's part of a checkpoint (see stage_state.hpp).
#include <ddl/parallel/strategies/pipeline/stage_state.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ddl/core/check.hpp>
#include <ddl/layers/named_tensors.hpp>
#include <ddl/parallel/communication/agreement.hpp>

namespace ddl::parallel {
namespace {

using Entries = std::vector<std::pair<std::string, Tensor>>;

constexpr int kStateTag = 0x3100;

// The index in the whole model of each of this rank's parameters: the
// parameters of every layer before its layer (each layer's count summed
// over the ranks, which hold it or nothing), then its place in the layer.
std::vector<std::int64_t> whole_model_indexes(const Communicator& comm, const layers::Module& model,
                                              std::size_t layer_count) {
  std::vector<double> counts(layer_count, 0.0);
  std::vector<std::size_t> layer_of;
  std::string problem;  // agreed before the sum, which every rank must join
  for (const auto& [name, parameter] : model.named_parameters()) {
    const auto layer = layers::leading_index(name);
    if (!layer || *layer < 0 || static_cast<std::size_t>(*layer) >= layer_count) {
      problem = fmt::format("pipeline checkpoint: rank {}'s parameter '{}' is not named by a layer of the {} in the "
                            "model",
                            comm.rank(), name, layer_count);
      break;
    }
    layer_of.push_back(static_cast<std::size_t>(*layer));
    ++counts[layer_of.back()];
  }
  agree_all_can_proceed(comm, problem, "pipeline checkpoint: numbering the parameters");
  comm.sum_doubles(counts);
  std::vector<std::int64_t> before(layer_count + 1, 0);
  for (std::size_t layer = 0; layer < layer_count; ++layer) {
    before[layer + 1] = before[layer] + static_cast<std::int64_t>(counts[layer]);
  }
  std::vector<std::int64_t> indexes;
  for (std::size_t k = 0; k < layer_of.size(); ++k) {
    const bool same_layer = k > 0 && layer_of[k] == layer_of[k - 1];
    indexes.push_back(same_layer ? indexes.back() + 1 : before[layer_of[k]]);
  }
  return indexes;
}

// "<k>.<buffer>" with k replaced by `index`.
std::string renamed(const std::string& name, std::int64_t index) {
  return std::to_string(index) + name.substr(name.find('.'));
}

// Entries in order of their leading index (a layer's or a parameter's),
// keeping the order of those with the same or none (the optimizer's "step").
void sort_by_index(Entries& entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return layers::leading_index(a.first).value_or(-1) < layers::leading_index(b.first).value_or(-1);
  });
}

DType parse_dtype(const std::string& name) {
  for (const DType dtype : {DType::Float32, DType::Int32, DType::Int64}) {
    if (dtype_name(dtype) == name) return dtype;
  }
  ddl::detail::fail("pipeline checkpoint: unknown dtype '{}' in a stage's state", name);
}

// Groups of named tensors, one after another: a JSON header naming each
// entry's name, dtype and shape, then the tensors' bytes.
void send_groups(const Communicator& comm, const std::vector<Entries>& groups, int peer) {
  nlohmann::json header = nlohmann::json::array();
  for (const Entries& group : groups) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [name, tensor] : group) {
      entries.push_back({{"name", name}, {"dtype", dtype_name(tensor.dtype())}, {"shape", tensor.shape().to_vector()}});
    }
    header.push_back(std::move(entries));
  }
  const std::string text = header.dump();
  const auto length = static_cast<std::int64_t>(text.size());
  comm.send(std::as_bytes(std::span(&length, 1)), peer, kStateTag);
  comm.send(std::as_bytes(std::span(text.data(), text.size())), peer, kStateTag);
  for (const Entries& group : groups) {
    for (const auto& [name, tensor] : group) comm.send(tensor, peer, kStateTag);
  }
}

std::vector<Entries> recv_groups(const Communicator& comm, int peer) {
  std::int64_t length = 0;
  comm.recv(std::as_writable_bytes(std::span(&length, 1)), peer, kStateTag);
  std::string text(static_cast<std::size_t>(length), '\0');
  comm.recv(std::as_writable_bytes(std::span(text.data(), text.size())), peer, kStateTag);
  std::vector<Entries> groups;
  for (const nlohmann::json& entries : nlohmann::json::parse(text)) {
    Entries& group = groups.emplace_back();
    for (const nlohmann::json& entry : entries) {
      Tensor tensor = Tensor::empty(Shape(entry.at("shape").get<std::vector<std::int64_t>>()),
                                    {parse_dtype(entry.at("dtype").get<std::string>()), cpu(), false});
      comm.recv(tensor, peer, kStateTag);
      group.emplace_back(entry.at("name").get<std::string>(), std::move(tensor));
    }
  }
  return groups;
}

}  // namespace

void gather_stage_state(const Communicator& comm, const layers::Module& model, std::size_t layer_count,
                        optim::TrainingState& state) {
  const std::vector<std::int64_t> indexes = whole_model_indexes(comm, model, layer_count);
  const auto parameters = static_cast<std::ptrdiff_t>(indexes.size());
  // state_dict() lists the parameters, then the buffers.
  Entries own_parameters(state.model.begin(), state.model.begin() + parameters);
  Entries own_buffers(state.model.begin() + parameters, state.model.end());
  Entries own_optimizer;
  for (const auto& [name, tensor] : state.optimizer) {
    if (name == "step") {
      if (comm.rank() == 0) own_optimizer.emplace_back(name, tensor);  // every stage steps alike: one counter
      continue;
    }
    own_optimizer.emplace_back(renamed(name, indexes[static_cast<std::size_t>(*layers::leading_index(name))]), tensor);
  }
  if (comm.rank() != 0) {
    send_groups(comm, {own_parameters, own_buffers, own_optimizer}, 0);
    return;
  }
  Entries all_buffers = std::move(own_buffers);
  state.model = std::move(own_parameters);
  state.optimizer = std::move(own_optimizer);
  for (int other = 1; other < comm.size(); ++other) {
    std::vector<Entries> groups = recv_groups(comm, other);
    DDL_CHECK(groups.size() == 3, "pipeline checkpoint: stage {} sent {} groups of state, not 3", other,
              groups.size());
    state.model.insert(state.model.end(), groups[0].begin(), groups[0].end());
    all_buffers.insert(all_buffers.end(), groups[1].begin(), groups[1].end());
    state.optimizer.insert(state.optimizer.end(), groups[2].begin(), groups[2].end());
  }
  // The ranks' runs of layers interleave when they hold several (chunks).
  sort_by_index(state.model);
  sort_by_index(all_buffers);
  sort_by_index(state.optimizer);
  state.model.insert(state.model.end(), all_buffers.begin(), all_buffers.end());
}

void select_stage_state(const Communicator& comm, const layers::Module& model, std::size_t layer_count,
                        optim::TrainingState& state) {
  const std::vector<std::int64_t> indexes = whole_model_indexes(comm, model, layer_count);
  std::set<std::int64_t> own_layers;
  for (const auto& [name, tensor] : model.state_dict()) {
    if (const auto layer = layers::leading_index(name)) own_layers.insert(*layer);
  }
  std::map<std::int64_t, std::int64_t> local_index;  // of the whole model's parameter index
  for (std::size_t k = 0; k < indexes.size(); ++k) local_index[indexes[k]] = static_cast<std::int64_t>(k);
  Entries model_entries;
  for (auto& [name, tensor] : state.model) {
    const auto layer = layers::leading_index(name);
    if (layer && own_layers.contains(*layer)) model_entries.emplace_back(name, tensor);
  }
  Entries optimizer_entries;
  for (auto& [name, tensor] : state.optimizer) {
    if (name == "step") {
      optimizer_entries.emplace_back(name, tensor);
      continue;
    }
    const auto parameter = layers::leading_index(name);
    if (!parameter) continue;
    if (const auto local = local_index.find(*parameter); local != local_index.end()) {
      optimizer_entries.emplace_back(renamed(name, local->second), tensor);
    }
  }
  state.model = std::move(model_entries);
  state.optimizer = std::move(optimizer_entries);
}

}  // namespace ddl::parallel
