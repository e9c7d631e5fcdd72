// Hierarchical allreduce, for jobs on several nodes (Horovod's
// HOROVOD_HIERARCHICAL_ALLREDUCE; NCCL's and MPICH's node-aware collectives
// are built on the same idea). Messages inside a node travel through shared
// memory; messages between nodes share each node's network interface,
// which is usually many times slower. A flat ring over every rank crosses
// between nodes at each node boundary it passes, and every one of its
// 2(p-1) steps waits for the slow link. Here only one rank per node, its
// leader (the node's lowest rank), talks to the other nodes:
//
//   1. reduce inside each node onto its leader (binomial tree, tree.cpp);
//   2. allreduce among the N leaders (the ring: 2(N-1) steps of n/N);
//   3. broadcast inside each node from its leader (binomial tree).
//
// Each node then sends 2 n (N-1)/N bytes to the others, where the flat
// ring sends 2 n (p-1)/p out of every node (on 2 nodes: n against nearly
// 2n), and the slow link's latency is paid 2(N-1) times instead of
// 2(p-1). The price is the node's work done one after another instead of
// spread over its ranks: the tree sends the whole buffer log2 of the
// node's ranks times each way. Nodes may hold different rank counts.
#include <ddl/parallel/collectives/collectives.hpp>

#include <ddl/core/check.hpp>
#include <ddl/parallel/collectives/transport.hpp>

namespace ddl::parallel {

void hierarchical_allreduce(const Communicator& comm, std::span<float> data, ReduceOp op) {
  hierarchical_allreduce(comm, comm.node(), comm.across_nodes(), data, op);
}

void hierarchical_allreduce(const Communicator& comm, const Communicator& node, const Communicator& leaders,
                            std::span<float> data, ReduceOp op) {
  const auto n = static_cast<std::int64_t>(data.size());
  detail::HostTransport inside(node, WireFormat::float32);
  detail::tree_reduce(inside, data.data(), n);
  if (node.rank() == 0) {
    DDL_CHECK(leaders.size() <= comm.size(), "hierarchical allreduce: {} leaders for {} ranks", leaders.size(),
              comm.size());
    detail::HostTransport across(leaders, WireFormat::float32);
    detail::ring_allreduce(across, data.data(), n, ReduceOp::sum);
    // The sum is complete here, once per node: the one place to average.
    if (op == ReduceOp::average && comm.size() > 1) detail::scale(data.data(), n, detail::average_factor(comm.size()));
  }
  detail::tree_broadcast(inside, data.data(), n, 0);
}

}  // namespace ddl::parallel
