// Internal: how a pipeline stage's activations and gradients travel to and
// from its neighbouring stages (pipeline.hpp). By default over MPI, through
// host memory for CUDA tensors. Between stages that each drive a GPU of their
// own, over NCCL on the GPU instead: one NCCL communicator per direction of
// each link, since NCCL matches a pair's messages in the order they are
// queued and activations (forward, in micro-batch order) and gradients
// (backward, in micro-batch order) must never wait behind each other.
#pragma once

#include <memory>
#include <optional>

#include <ddl/core/device.hpp>
#include <ddl/core/tensor.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>

namespace ddl::parallel {

// A tensor on its way between stages.
struct StageMessage {
  TensorMessage mpi;  // over MPI: the request and its host memory
  NcclMessage nccl;   // over NCCL
  Tensor on_device;   // over NCCL: the tensor sent or received, on the stage's GPU

  // Waits for a receive and returns the tensor on `device`.
  Tensor take(const Device& device);
  void wait();
  // Whether a receive over MPI has completed (without waiting); a message
  // over NCCL says no until taken.
  bool arrived();
};

class StageLinks {
 public:
  // What a message carries: an activation, from a stage to the next, or a
  // gradient, back to the stage before.
  enum class Carries { activation, gradient };

  // Collective over `pipeline` (one rank per stage, in order): every stage
  // passes its device. NCCL is used when `nccl` is asked for, ddl has it,
  // and every stage is on a GPU no neighbour shares; then each message goes
  // between neighbouring ranks (an activation to rank + 1, a gradient to
  // rank - 1). Over MPI any rank of `pipeline` may be the peer (the
  // wrap-around of an interleaved schedule's chunks).
  StageLinks(const Communicator& pipeline, const Device& device, bool nccl);

  bool over_nccl() const { return nccl_.has_value(); }
  // A receive of a float32 tensor of `shape` from rank `peer`, posted now.
  StageMessage receive(int peer, Carries what, const Shape& shape, int tag) const;
  StageMessage send(int peer, Carries what, const Tensor& tensor, int tag) const;

 private:
  struct Nccl {
    std::optional<NcclCommunicator> activations_in, activations_out, gradients_in, gradients_out;
  };

  Communicator pipeline_;
  Device device_;
  std::optional<Nccl> nccl_;
};

}  // namespace ddl::parallel
