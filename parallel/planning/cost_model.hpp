// The alpha-beta-gamma cost model of ddl's collectives (Hockney's model, with
// Thakur, Rabenseifner and Gropp's costs of MPICH's collectives, 2005): a
// message of m bytes over a link costs alpha + m beta, and reducing m bytes
// locally costs m gamma. Each algorithm of parallel/collectives is a sum of
// such terms, so its time at any rank count and size follows from three
// numbers measured once (apps/ddl-model fits them on the machine it runs on).
// Ranks sit in nodes of ranks_per_node: a message between ranks of one node
// takes the intra-node link, others the network, whose interface the messages
// leaving a node at once share; a step lasts as long as its slowest part.
//
// Single-process: pure functions, no MPI.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ddl/parallel/collectives/allreduce_algorithm.hpp>

namespace ddl::parallel::cost {

// A link: alpha (seconds per message) and beta (seconds per byte, the
// inverse of the bandwidth).
struct Link {
  double alpha = 0.0;
  double beta = 0.0;
  double seconds(double bytes) const { return alpha + bytes * beta; }
};

struct Machine {
  Link intra_node;               // ranks on one node (shared memory)
  Link network;                  // ranks on different nodes
  int ranks_per_node = 1;        // ranks 0..k-1 on node 0, k..2k-1 on node 1, ...; the network
                                 // link is the node's interface, shared by what leaves the node
  double gamma = 0.0;            // seconds per byte reduced (a float32 add per 4 bytes)
  double barrier = 0.0;          // seconds per barrier of one node's ranks (the shm allreduce)
  double shm_segment = 1 << 20;  // bytes the shm allreduce reduces between two barriers (DDL_SHM_SEGMENT)
};

// Seconds for one allreduce of `bytes` over `ranks` ranks, as ddl's
// algorithm of that name moves its data (collectives.hpp's table):
//   ring   2(p-1) steps of bytes/p each: 2(p-1) alpha + 2 (p-1)/p bytes beta
//          + (p-1)/p bytes gamma, on the slowest link of the ring (one
//          message leaves each node per step);
//   rhd    log2 p halving steps (bytes/2, /4, ...) and as many doubling
//          steps, each rank exchanging with its partner at distance p/2,
//          p/4, ... (the first steps across nodes, every rank of a node at
//          once); p not a power of two first folds the extra ranks in (one
//          whole message and its sum) and sends their results back;
//   tree   a binomial reduce then broadcast of the whole message: 2 ceil(log2 p)
//          steps of alpha + bytes beta, ceil(log2 p) sums;
//   naive  rank 0 receives p-1 whole messages one after another, sums them,
//          and sends p-1 back: its link is the bottleneck;
//   shm    one node only (nullopt beyond one): the ring's bytes between
//          cores, 2 (p-1)/p bytes at the intra-node beta, and its sums, but
//          2 barriers per segment instead of 2(p-1) message latencies.
//   hierarchical  the tree's reduce and broadcast over one node's ranks,
//          on the intra-node link, around the ring over one leader per node,
//          whose every step crosses the network (one message out of each
//          node); nodes of ranks_per_node ranks, the last one maybe fewer.
// `builtin` (MPI's own choice) is not modelled: nullopt.
std::optional<double> allreduce_seconds(AllreduceAlgorithm algorithm, int ranks, double bytes, const Machine& machine);

// The candidates the model prices, with their seconds for an allreduce of
// `bytes`, fastest first (ties in the candidates' order); those it does
// not price are left out. What `--allreduce auto` chooses from.
std::vector<std::pair<AllreduceAlgorithm, double>> fastest_allreduces(std::span<const AllreduceAlgorithm> candidates,
                                                                      int ranks, double bytes, const Machine& machine);

// Seconds for one allgather of `bytes` over `ranks` ranks, each holding
// bytes / ranks of it (the second half of the ring's and of rhd's
// allreduce, run alone by sharded data parallelism): ring (p-1) steps of
// bytes/p; rhd the doubling steps, p not a power of two also the extra
// ranks' chunks folded in and the whole sent back to them. nullopt for the
// other algorithms (sharding does not use them).
std::optional<double> allgather_seconds(AllreduceAlgorithm algorithm, int ranks, double bytes, const Machine& machine);

// The algorithms the model covers, in collectives.hpp's order.
std::vector<AllreduceAlgorithm> modelled_algorithms();

// One synchronous parameter-server step (parameter_server.cpp): each of
// `workers` pushes its gradients (`bytes`, split evenly over `servers`) and
// pulls the new values; a server receives and sums its share from every
// worker in turn and answers each. The servers' links carry workers x
// bytes / servers each way (and servers on one node share its network
// interface): the bandwidth bottleneck that allreduce avoids.
double parameter_server_seconds(int workers, int servers, double bytes, const Machine& machine);

// Data parallelism (weak scaling: each rank keeps its per-rank batch): a
// step computes for `compute_seconds`, then waits for the part of the
// gradient allreduce that backward did not hide (1 - overlap of it). The
// efficiency is compute / (compute + exposed), the fraction of N times the
// 1-rank throughput the job reaches.
double data_parallel_efficiency(double compute_seconds, double allreduce_seconds, double overlap = 0.0);

// A pipeline of `stages` balanced stages running `micro_batches`
// micro-batches (GPipe or 1F1B, the same bubble): the fraction of each
// stage's time spent idle, (p - 1) / (M + p - 1), and the speed-up over one
// process, p M / (M + p - 1), before the messages' cost.
double pipeline_bubble(int stages, int micro_batches);
double pipeline_speedup(int stages, int micro_batches);

// A least-squares fit of time = alpha + bytes * beta to measurements, each
// weighted by 1/time: between an absolute fit, which the largest transfer
// alone would decide, and a relative one (1/time^2), where the many small
// sizes decide beta too. A link that is not quite a line shows why: the
// simulated cluster's rate-limited link lets a burst of a millisecond's
// bytes through at memory speed, so a relative fit put its 1 Gbit/s at
// 0.31 GB/s and under-predicted a 1 MiB allreduce 2.5 times; this one fits
// 0.125 GB/s (lesson 12). Needs two distinct sizes.
Link fit_link(std::span<const double> bytes, std::span<const double> seconds);

// "2us", "1.5 ms", "3e-6" (seconds) -> seconds; "100Gb/s", "12.5GB/s",
// "25 GiB/s", "1e10" (bytes/s) -> bytes per second. ddl::Error naming the
// text otherwise.
double parse_seconds(const std::string& text);
double parse_bandwidth(const std::string& text);

}  // namespace ddl::parallel::cost
