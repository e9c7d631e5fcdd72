// Allreduce by name (see collectives.hpp): the dispatch for host buffers,
// the Tensor entry point that stages CUDA tensors through the host, and the
// device-resident one that runs the same algorithms on the GPU over NCCL;
// and the dispatch of its halves, reduce-scatter and allgather.
#include <ddl/parallel/collectives/collectives.hpp>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {
namespace {

// The algorithms written over a transport (all but shm and builtin).
template <class Transport>
void run_algorithm(AllreduceAlgorithm algorithm, Transport& transport, float* data, std::int64_t n, ReduceOp op) {
  switch (algorithm) {
    case AllreduceAlgorithm::ring:
      return detail::ring_allreduce(transport, data, n, op);
    case AllreduceAlgorithm::rhd:
      return detail::halving_doubling_allreduce(transport, data, n, op);
    case AllreduceAlgorithm::tree:
      return detail::tree_allreduce(transport, data, n, op);
    case AllreduceAlgorithm::naive:
      return detail::naive_allreduce(transport, data, n, op);
    case AllreduceAlgorithm::shm:
    case AllreduceAlgorithm::hierarchical:
    case AllreduceAlgorithm::builtin:
    case AllreduceAlgorithm::automatic:
      break;
  }
  throw Error(fmt::format("allreduce: {} is not written over a transport", algorithm_name(algorithm)));
}

void require_chosen(AllreduceAlgorithm algorithm) {
  DDL_CHECK(algorithm != AllreduceAlgorithm::automatic,
            "allreduce: auto is a request, not an algorithm: make_setup replaces it by the one the cost model "
            "predicts fastest (choose_allreduce); name an algorithm here");
}

void require_float32(const Tensor& tensor) {
  DDL_CHECK(tensor.dtype() == DType::Float32, "allreduce: needs a float32 tensor, got {} {}", tensor.dtype(),
            tensor.shape());
}

}  // namespace

void allreduce(const Communicator& comm, std::span<float> data, AllreduceAlgorithm algorithm, WireFormat wire,
               ReduceOp op) {
  require_chosen(algorithm);
  DDL_CHECK(wire == WireFormat::float32 || algorithm == AllreduceAlgorithm::ring,
            "allreduce: float16 on the wire is implemented for the ring only, not for {}", algorithm_name(algorithm));
  const auto n = static_cast<std::int64_t>(data.size());
  if (algorithm == AllreduceAlgorithm::hierarchical) {
    return hierarchical_allreduce(comm, data, op);  // averaged by the leaders, where the sum is complete
  }
  if (algorithm == AllreduceAlgorithm::shm) {
    shared_memory_allreduce(comm, data);
  } else if (algorithm == AllreduceAlgorithm::builtin) {
    builtin_allreduce(comm, data);
  } else {
    detail::HostTransport transport(comm, wire);
    return run_algorithm(algorithm, transport, data.data(), n, op);
  }
  // shm and MPI sum the buffer as a whole, so they average by a pass of their own.
  if (op == ReduceOp::average && comm.size() > 1) detail::scale(data.data(), n, detail::average_factor(comm.size()));
}

namespace {

[[noreturn]] void no_half(const char* collective, AllreduceAlgorithm algorithm) {
  throw Error(fmt::format("{}: {} has no {} of its own; use ring, rhd or builtin", collective,
                          algorithm_name(algorithm), collective));
}

}  // namespace

bool has_halves(AllreduceAlgorithm algorithm) {
  return algorithm == AllreduceAlgorithm::ring || algorithm == AllreduceAlgorithm::rhd ||
         algorithm == AllreduceAlgorithm::builtin;
}

void reduce_scatter(const Communicator& comm, std::span<float> data, AllreduceAlgorithm algorithm, ReduceOp op) {
  switch (algorithm) {
    case AllreduceAlgorithm::ring:
      return ring_reduce_scatter(comm, data, WireFormat::float32, op);
    case AllreduceAlgorithm::rhd:
      return halving_reduce_scatter(comm, data, op);
    case AllreduceAlgorithm::builtin:
      return builtin_reduce_scatter(comm, data, op);
    case AllreduceAlgorithm::tree:
    case AllreduceAlgorithm::naive:
    case AllreduceAlgorithm::shm:
    case AllreduceAlgorithm::hierarchical:
    case AllreduceAlgorithm::automatic:
      break;
  }
  no_half("reduce_scatter", algorithm);
}

void allgather(const Communicator& comm, std::span<float> data, AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::ring:
      return ring_allgather(comm, data);
    case AllreduceAlgorithm::rhd:
      return doubling_allgather(comm, data);
    case AllreduceAlgorithm::builtin:
      return builtin_allgather(comm, data);
    case AllreduceAlgorithm::tree:
    case AllreduceAlgorithm::naive:
    case AllreduceAlgorithm::shm:
    case AllreduceAlgorithm::hierarchical:
    case AllreduceAlgorithm::automatic:
      break;
  }
  no_half("allgather", algorithm);
}

namespace {

// Runs `collective` on a host span of `tensor`'s values: the tensor's own
// on the CPU, else a copy, written back after.
template <class Collective>
void through_host(const Tensor& tensor, Collective collective) {
  require_float32(tensor);
  const Tensor host = tensor.device().is_cpu() ? tensor : tensor.to(cpu());
  collective(std::span<float>(host.data<float>(), static_cast<std::size_t>(host.numel())));
  if (!tensor.device().is_cpu()) tensor.copy_from(host);
}

}  // namespace

void allreduce(const Communicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm, ReduceOp op) {
  through_host(tensor, [&](std::span<float> data) { allreduce(comm, data, algorithm, WireFormat::float32, op); });
}

void allgather(const Communicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm) {
  through_host(tensor, [&](std::span<float> data) { allgather(comm, data, algorithm); });
}

namespace {

void require_on_gpu(const NcclCommunicator& comm, const Tensor& tensor, const char* collective) {
  require_float32(tensor);
  DDL_CHECK(tensor.device() == cuda(comm.device()),
            "{}: rank {}'s NCCL communicator drives cuda:{}, but the tensor of shape {} is on {}", collective,
            comm.rank(), comm.device(), tensor.shape(), tensor.device());
}

// The frame of a collective on the GPU: the tensor checked, nothing to do
// for one rank (the average of one is itself, and nothing reads the tensor,
// so nothing waits for `written` either; but builtin's NCCL calls run even
// then, so a machine of one GPU runs them), and a transport for
// run(transport, data, n), finished after it.
template <class Run>
void on_gpu(const char* collective, const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm,
            cuda_backend::ComputeMark* written, Run run) {
  require_on_gpu(comm, tensor, collective);
  if (algorithm != AllreduceAlgorithm::builtin && comm.size() == 1) return;
  const std::int64_t n = tensor.numel();
  // What an exchange adds lands in scratch first: the ring adds a chunk at
  // a time, the others up to the whole buffer, NCCL's own nothing.
  const std::int64_t scratch = algorithm == AllreduceAlgorithm::builtin ? 0
                               : algorithm == AllreduceAlgorithm::ring  ? chunk_range(n, comm.size(), 0).size()
                                                                        : n;
  detail::NcclTransport transport(
      comm, fmt::format("{} {} of {} floats on the GPU", algorithm_name(algorithm), collective, n), scratch, written);
  run(transport, static_cast<float*>(tensor.raw_data()), n);
  transport.finish();
}

}  // namespace

void allreduce(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm, ReduceOp op) {
  detail::allreduce_after(comm, tensor, algorithm, op, nullptr);
}

void detail::allreduce_after(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm,
                             ReduceOp op, cuda_backend::ComputeMark* written) {
  require_chosen(algorithm);
  DDL_CHECK(runs_on_gpu(algorithm),
            "allreduce: {} reduces host memory over MPI and has no GPU form; on a GPU use ring, rhd, tree, naive or "
            "builtin (NCCL's own, which is node-aware itself)",
            algorithm_name(algorithm));
  on_gpu("allreduce", comm, tensor, algorithm, written,
         [&](detail::NcclTransport& transport, float* data, std::int64_t n) {
           if (algorithm == AllreduceAlgorithm::builtin) return transport.allreduce(data, n, op);
           run_algorithm(algorithm, transport, data, n, op);
         });
}

void reduce_scatter(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm, ReduceOp op) {
  detail::reduce_scatter_after(comm, tensor, algorithm, op, nullptr);
}

void detail::reduce_scatter_after(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm,
                                  ReduceOp op, cuda_backend::ComputeMark* written) {
  if (!has_halves(algorithm)) no_half("reduce_scatter", algorithm);
  on_gpu("reduce_scatter", comm, tensor, algorithm, written,
         [&](detail::NcclTransport& transport, float* data, std::int64_t n) {
           if (algorithm == AllreduceAlgorithm::builtin) return transport.reduce_scatter(data, n, op);
           if (algorithm == AllreduceAlgorithm::rhd) return detail::halving_reduce_scatter(transport, data, n, op);
           detail::ring_reduce_scatter(transport, data, n);
           const ChunkRange mine = chunk_range(n, transport.size(), transport.rank());
           transport.complete(data + mine.begin, mine.size(), op);
         });
}

void allgather(const NcclCommunicator& comm, const Tensor& tensor, AllreduceAlgorithm algorithm) {
  if (!has_halves(algorithm)) no_half("allgather", algorithm);
  on_gpu("allgather", comm, tensor, algorithm, nullptr,
         [&](detail::NcclTransport& transport, float* data, std::int64_t n) {
           if (algorithm == AllreduceAlgorithm::builtin) return transport.allgather(data, n);
           if (algorithm == AllreduceAlgorithm::rhd) return detail::doubling_allgather(transport, data, n);
           detail::ring_allgather(transport, data, n);
         });
}

}  // namespace ddl::parallel
