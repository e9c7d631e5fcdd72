// Agreement and broadcast of the initial state (see initial_state.hpp).
#include <ddl/parallel/strategies/initial_state.hpp>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/agreement.hpp>

namespace ddl::parallel {
namespace {

std::vector<std::string> describe(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<std::string> lines;
  for (const auto& [name, tensor] : tensors)
    lines.push_back(fmt::format("{} {} {}", name, tensor.shape(), tensor.dtype()));
  return lines;
}

}  // namespace

void broadcast_tensor(const Communicator& comm, const Tensor& tensor) {
  const Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(cpu());
  if (host.dtype() == DType::Float32) {
    tree_broadcast(comm, std::span<float>(host.data<float>(), static_cast<std::size_t>(host.numel())), 0);
  } else {
    comm.broadcast_bytes(std::span<std::byte>(static_cast<std::byte*>(host.raw_data()), host.nbytes()), 0);
  }
  if (!tensor.device().is_cpu()) tensor.copy_from(host);
}

void broadcast_initial_state(const Communicator& comm, layers::Module& model, optim::Optimizer* optimizer,
                             const std::string& who) {
  // Agree first: broadcasting into differently shaped tensors would hang or corrupt.
  const auto tensors = model.state_dict();
  agree_on_layout(comm, describe(tensors), who + ": the model's parameters and buffers");
  for (const auto& [name, tensor] : tensors) broadcast_tensor(comm, tensor.detach());
  if (optimizer == nullptr) return;
  auto state = optimizer->state();
  agree_on_layout(comm, describe(state), who + ": the optimizer's state");
  for (const auto& [name, tensor] : state) broadcast_tensor(comm, tensor);
  optimizer->load_state(state);  // "step" is a copy: write it back
}

}  // namespace ddl::parallel
