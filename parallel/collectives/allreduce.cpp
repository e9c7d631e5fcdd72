// Allreduce by name (see collectives.hpp): the dispatch, and the Tensor
// entry point that stages CUDA tensors through the host.
#include <ddl/parallel/collectives/collectives.hpp>

#include <fmt/ranges.h>

#include <ddl/core/check.hpp>
#include <ddl/parallel/choice_by_name.hpp>

namespace ddl::parallel {

std::string algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::ring: return "ring";
    case AllreduceAlgorithm::rhd: return "rhd";
    case AllreduceAlgorithm::tree: return "tree";
    case AllreduceAlgorithm::naive: return "naive";
    case AllreduceAlgorithm::shm: return "shm";
    case AllreduceAlgorithm::builtin: return "builtin";
  }
  return "unknown";
}

std::vector<AllreduceAlgorithm> all_allreduce_algorithms() {
  return {AllreduceAlgorithm::ring,  AllreduceAlgorithm::rhd, AllreduceAlgorithm::tree,
          AllreduceAlgorithm::naive, AllreduceAlgorithm::shm, AllreduceAlgorithm::builtin};
}

AllreduceAlgorithm parse_allreduce(const std::string& name) {
  return choice_by_name(name, all_allreduce_algorithms(), algorithm_name, "allreduce algorithm");
}

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
