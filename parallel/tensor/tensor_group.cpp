// TensorGroup (see tensor_group.hpp).
#include <ddl/parallel/tensor/tensor_group.hpp>

#include <ddl/core/timeline.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/agreement.hpp>

namespace ddl::parallel {

TensorGroup::TensorGroup(Communicator comm, AllreduceAlgorithm algorithm)
    : comm_(std::move(comm)), algorithm_(algorithm), rank_(comm_.rank()), size_(comm_.size()) {}

void TensorGroup::allreduce(const Tensor& tensor) const {
  timeline::Span span("communication", "tensor-parallel allreduce");
  if (span.active()) span.arg("bytes", static_cast<std::int64_t>(tensor.nbytes()));
  if (tensor.device().is_cuda() && !gpu_decided_) {
    // Every rank of the group reaches its first split layer's allreduce
    // with its activations on its GPU at once: the decision is collective.
    gpu_decided_ = true;
    if (every_rank_has_its_gpu(comm_, tensor.device().index()) && NcclCommunicator::built() &&
        runs_on_gpu(algorithm_)) {
      nccl_ = std::make_shared<NcclCommunicator>(NcclCommunicator::create(comm_, tensor.device().index()));
    }
  }
  if (nccl_ && tensor.device().is_cuda()) {
    parallel::allreduce(*nccl_, tensor, algorithm_);
    return;
  }
  parallel::allreduce(comm_, tensor, algorithm_);
}

}  // namespace ddl::parallel
