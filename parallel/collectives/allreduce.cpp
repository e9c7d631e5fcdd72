// Allreduce by name (see collectives.hpp): the dispatch, and the Tensor
// entry point that stages CUDA tensors through the host.
#include <ddl/parallel/collectives/collectives.hpp>

#include <ddl/core/check.hpp>

namespace ddl::parallel {

void allreduce(const Communicator& comm, std::span<float> data, AllreduceAlgorithm algorithm, WireFormat wire) {
  DDL_CHECK(wire == WireFormat::float32 || algorithm == AllreduceAlgorithm::ring,
            "allreduce: float16 on the wire is implemented for the ring only, not for {}", algorithm_name(algorithm));
  switch (algorithm) {
    case AllreduceAlgorithm::ring: return ring_allreduce(comm, data, wire);
    case AllreduceAlgorithm::rhd: return halving_doubling_allreduce(comm, data);
    case AllreduceAlgorithm::tree: return tree_allreduce(comm, data);
    case AllreduceAlgorithm::naive: return naive_allreduce(comm, data);
    case AllreduceAlgorithm::shm: return shared_memory_allreduce(comm, data);
    case AllreduceAlgorithm::builtin: return builtin_allreduce(comm, data);
  }
}

void allreduce(const Communicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm) {
  DDL_CHECK(tensor.dtype() == DType::Float32, "allreduce: needs a float32 tensor, got {} {}", tensor.dtype(),
            tensor.shape());
  const Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(cpu());
  allreduce(comm, std::span<float>(host.data<float>(), static_cast<std::size_t>(host.numel())), algorithm);
  if (!tensor.device().is_cpu()) tensor.copy_from(host);
}

}  // namespace ddl::parallel
