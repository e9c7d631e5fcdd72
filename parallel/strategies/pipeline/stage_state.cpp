// A pipeline stage's part of a checkpoint (see stage_state.hpp).
#include <ddl/parallel/strategies/pipeline/stage_state.hpp>

#include <optional>
#include <span>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <ddl/core/check.hpp>
#include <ddl/layers/named_tensors.hpp>
#include <ddl/parallel/communication/agreement.hpp>

namespace ddl::parallel {
namespace {

using Entries = std::vector<std::pair<std::string, Tensor>>;

constexpr int kStateTag = 0x3100;

// The parameter count of every stage, in stage order.
std::vector<std::int64_t> parameter_counts(const Communicator& comm, const layers::Module& model) {
  const auto mine = static_cast<std::int64_t>(model.parameters().size());
  return allgather_values(comm, std::span<const std::int64_t>(&mine, 1));
}

std::int64_t parameters_before(const std::vector<std::int64_t>& counts, int stage) {
  return std::accumulate(counts.begin(), counts.begin() + stage, std::int64_t{0});
}

// "<k>.<buffer>" with k moved by `shift`.
std::string shifted(const std::string& name, std::int64_t shift) {
  return std::to_string(*layers::leading_index(name) + shift) + name.substr(name.find('.'));
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

void gather_stage_state(const Communicator& comm, const layers::Module& model, optim::TrainingState& state) {
  const std::vector<std::int64_t> counts = parameter_counts(comm, model);
  const int stage = comm.rank();
  const auto parameters = static_cast<std::ptrdiff_t>(counts[static_cast<std::size_t>(stage)]);
  // state_dict() lists the parameters, then the buffers.
  Entries own_parameters(state.model.begin(), state.model.begin() + parameters);
  Entries own_buffers(state.model.begin() + parameters, state.model.end());
  Entries own_optimizer;
  const std::int64_t offset = parameters_before(counts, stage);
  for (const auto& [name, tensor] : state.optimizer) {
    if (name == "step") {
      if (stage == 0) own_optimizer.emplace_back(name, tensor);  // every stage steps alike: one counter
      continue;
    }
    own_optimizer.emplace_back(shifted(name, offset), tensor);
  }
  if (stage != 0) {
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
  state.model.insert(state.model.end(), all_buffers.begin(), all_buffers.end());
}

void select_stage_state(const Communicator& comm, const StageRange& layers, const layers::Module& model,
                        optim::TrainingState& state) {
  const std::vector<std::int64_t> counts = parameter_counts(comm, model);
  const int stage = comm.rank();
  const std::int64_t offset = parameters_before(counts, stage);
  const std::int64_t own = counts[static_cast<std::size_t>(stage)];
  Entries model_entries;
  for (auto& [name, tensor] : state.model) {
    const auto layer = layers::leading_index(name);
    if (layer && *layer >= static_cast<std::int64_t>(layers.first) && *layer <= static_cast<std::int64_t>(layers.last)) {
      model_entries.emplace_back(name, tensor);
    }
  }
  Entries optimizer_entries;
  for (auto& [name, tensor] : state.optimizer) {
    if (name == "step") {
      optimizer_entries.emplace_back(name, tensor);
      continue;
    }
    const auto parameter = layers::leading_index(name);
    if (parameter && *parameter >= offset && *parameter < offset + own) {
      optimizer_entries.emplace_back(shifted(name, -offset), tensor);
    }
  }
  state.model = std::move(model_entries);
  state.optimizer = std::move(optimizer_entries);
}

}  // namespace ddl::parallel
