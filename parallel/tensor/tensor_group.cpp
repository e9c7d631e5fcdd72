// TensorGroup (see tensor_group.hpp).
#include <ddl/parallel/tensor/tensor_group.hpp>

#include <ddl/core/timeline.hpp>

namespace ddl::parallel {

TensorGroup::TensorGroup(Communicator comm, AllreduceAlgorithm algorithm)
    : comm_(std::move(comm)), algorithm_(algorithm), rank_(comm_.rank()), size_(comm_.size()) {}

void TensorGroup::allreduce(const Tensor& tensor) const {
  timeline::Span span("communication", "tensor-parallel allreduce");
  if (span.active()) span.arg("bytes", static_cast<std::int64_t>(tensor.nbytes()));
  parallel::allreduce(comm_, tensor, algorithm_);
}

}  // namespace ddl::parallel
