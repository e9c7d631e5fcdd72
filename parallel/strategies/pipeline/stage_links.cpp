// How pipeline stages exchange activations and gradients (see stage_links.hpp).
#include <ddl/parallel/strategies/pipeline/stage_links.hpp>

#include <optional>
#include <string>
#include <vector>

#include <ddl/core/check.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/parallel/communication/agreement.hpp>

namespace ddl::parallel {
namespace {

// NCCL wants every rank of a communicator on its own GPU: whether each
// stage is on a GPU and no neighbour drives the same physical one, whatever
// index each process gives it (collective).
bool every_stage_has_its_gpu(const Communicator& pipeline, const Device& device) {
  const std::vector<std::string> uuids =
      gather_gpu_uuids(pipeline, device.is_cuda() ? std::optional<int>(device.index()) : std::nullopt);
  for (std::size_t s = 0; s < uuids.size(); ++s) {
    if (uuids[s].empty()) return false;
    if (s > 0 && uuids[s] == uuids[s - 1]) return false;  // the same GPU as the stage before
  }
  return true;
}

}  // namespace

Tensor StageMessage::take(const Device& device) {
  if (on_device.defined()) {
    nccl.wait();
    return on_device;
  }
  mpi.request.wait();
  return mpi.host.to(device);
}

bool StageMessage::arrived() { return !on_device.defined() && mpi.request.test(); }

void StageMessage::wait() {
  nccl.wait();
  mpi.request.wait();
}

StageLinks::StageLinks(const Communicator& pipeline, const Device& device, bool nccl)
    : pipeline_(pipeline), device_(device) {
  // Every rank takes part in the same collectives, whatever it decides.
  const bool wanted = nccl && NcclCommunicator::built();
  // A single stage has no neighbour, so no link to open.
  if (!every_stage_has_its_gpu(pipeline, device) || !wanted || pipeline.size() == 1) return;
  nccl_.emplace();
  const int stage = pipeline.rank();
  // Link l joins stages l and l+1 (ranks 0 and 1 of its pair). Each
  // direction is opened with a one-element message while both stages are
  // here, so NCCL connects it now, not in the middle of a step.
  const Tensor one = zeros({1}, {DType::Float32, device, false});
  for (int link = 0; link + 1 < pipeline.size(); ++link) {
    const bool member = stage == link || stage == link + 1;
    const Communicator pair = pipeline.split(member ? 0 : 1, stage);
    if (!member) continue;
    NcclCommunicator activations = NcclCommunicator::create(pair, device.index());
    NcclCommunicator gradients = NcclCommunicator::create(pair, device.index());
    if (stage == link) {
      activations.send(one, 1);
      gradients.recv(one, 1);
      nccl_->activations_out = std::move(activations);
      nccl_->gradients_in = std::move(gradients);
    } else {
      activations.recv(one, 0);
      gradients.send(one, 0);
      nccl_->activations_in = std::move(activations);
      nccl_->gradients_out = std::move(gradients);
    }
  }
}

StageMessage StageLinks::receive(int peer, Carries what, const Shape& shape, int tag) const {
  StageMessage message;
  if (!nccl_) {
    message.mpi = pipeline_.irecv(shape, DType::Float32, peer, tag);
    return message;
  }
  // Activations come from the stage before, gradients from the one after.
  const bool activation = what == Carries::activation;
  DDL_CHECK(peer == pipeline_.rank() + (activation ? -1 : 1),
            "StageLinks: stage {} receives {} over NCCL from stage {}, not its neighbour", pipeline_.rank(),
            activation ? "an activation" : "a gradient", peer);
  const NcclCommunicator& link = activation ? *nccl_->activations_in : *nccl_->gradients_in;
  message.on_device = Tensor::empty(shape, {DType::Float32, device_, false});
  message.nccl = link.recv_async(message.on_device, activation ? 0 : 1);
  return message;
}

StageMessage StageLinks::send(int peer, Carries what, const Tensor& tensor, int tag) const {
  StageMessage message;
  if (!nccl_) {
    message.mpi = pipeline_.isend(tensor, peer, tag);
    return message;
  }
  const bool activation = what == Carries::activation;
  DDL_CHECK(peer == pipeline_.rank() + (activation ? 1 : -1),
            "StageLinks: stage {} sends {} over NCCL to stage {}, not its neighbour", pipeline_.rank(),
            activation ? "an activation" : "a gradient", peer);
  const NcclCommunicator& link = activation ? *nccl_->activations_out : *nccl_->gradients_out;
  message.on_device = tensor.detach();
  message.nccl = link.send_async(message.on_device, activation ? 1 : 0);
  return message;
}

}  // namespace ddl::parallel
