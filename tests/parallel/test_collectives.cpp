// Every allreduce algorithm (parallel/collectives) under mpiexec with 2, 3
// and 4 ranks, on random data of awkward sizes: 0, 1, fewer elements than
// ranks, not divisible by the rank count, and several MiB (many ring
// segments). Each result is checked against a double-precision sum that
// every rank computes from every rank's seeded data, and against
// MPI_Allreduce; every rank must end with the same bits. The same for the
// reduce-scatters and allgathers (against MPI_Reduce_scatter, and
// composed into our allreduce bit for bit).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/parallel/collectives/collectives.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

using ddl::test::rank_data;

namespace {

std::vector<float> exact_sum(int ranks, std::int64_t n) {
  std::vector<double> sum(static_cast<std::size_t>(n), 0.0);
  for (int r = 0; r < ranks; ++r) {
    const auto data = rank_data(r, n);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += data[i];
  }
  return {sum.begin(), sum.end()};
}

std::vector<std::int64_t> awkward_sizes(int ranks) {
  return {0, 1, ranks - 1, ranks + 1, 7 * ranks + 3, 1000003, (3 << 20) / 4 + 5};  // the last two: ~4 and ~3 MiB
}

// Whether every rank holds exactly these bytes.
bool same_on_every_rank(const Communicator& comm, const std::vector<float>& values) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the bytes
  for (const float value : values) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    hash = (hash ^ bits) * 1099511628211ull;
  }
  const auto all = comm.allgather_bytes(std::as_bytes(std::span<const std::uint64_t>(&hash, 1)));
  for (int r = 0; r < comm.size(); ++r) {
    if (std::memcmp(all.data() + r * sizeof(hash), &hash, sizeof(hash)) != 0) return false;
  }
  return true;
}

// The algorithms that run on `comm`'s ranks: shm needs them all on one
// node (across the simulated cluster's nodes it is refused; a case below).
std::vector<AllreduceAlgorithm> algorithms_for(const Communicator& comm) {
  std::vector<AllreduceAlgorithm> algorithms = all_allreduce_algorithms();
  if (comm.local_size() < comm.size()) std::erase(algorithms, AllreduceAlgorithm::shm);
  return algorithms;
}

}  // namespace

TEST_CASE("Collectives: shm across nodes is refused on every rank, naming each node's ranks") {
  const Communicator world = Communicator::world();
  if (world.local_size() == world.size()) return test::skip("every rank is on one node (scripts/cluster/simulate.sh)");
  std::vector<float> data(5, 1.0f);
  CHECK(test::throws_error_mentioning([&] { allreduce(world, data, AllreduceAlgorithm::shm); },
                                      {"shm allreduce", world.describe_nodes(), "use ring (or rhd) across nodes"}));
}

TEST_CASE("Collectives: every allreduce algorithm sums awkward sizes like MPI_Allreduce, the same on every rank") {
  const Communicator world = Communicator::world();
  for (const AllreduceAlgorithm algorithm : algorithms_for(world)) {
    for (const std::int64_t n : awkward_sizes(world.size())) {
      CAPTURE(algorithm_name(algorithm));
      CAPTURE(n);
      std::vector<float> data = rank_data(world.rank(), n);
      std::vector<float> reference = data;
      allreduce(world, data, algorithm);
      builtin_allreduce(world, reference);
      // p <= 4 terms of size <= 1: float sums in any order are within a few ulps.
      CHECK(test::all_close(data, exact_sum(world.size(), n), 1e-6, 1e-5));
      CHECK(test::all_close(data, reference, 1e-6, 1e-5));
      CHECK(same_on_every_rank(world, data));
    }
  }
}

TEST_CASE("Collectives: every algorithm's average is its sum times 1/p, bit for bit, the same on every rank") {
  const Communicator world = Communicator::world();
  const float inverse = 1.0f / static_cast<float>(world.size());
  for (const AllreduceAlgorithm algorithm : algorithms_for(world)) {
    for (const std::int64_t n : awkward_sizes(world.size())) {
      CAPTURE(algorithm_name(algorithm));
      CAPTURE(n);
      std::vector<float> sum = rank_data(world.rank(), n);
      std::vector<float> average = sum;
      allreduce(world, sum, algorithm);
      allreduce(world, average, algorithm, WireFormat::float32, ReduceOp::average);
      // Divided once, where the sum is complete: the same multiply of the
      // same sums, whichever rank did it.
      std::size_t differing = 0;
      for (std::size_t i = 0; i < sum.size(); ++i) differing += average[i] != sum[i] * inverse ? 1 : 0;
      CHECK(differing == 0);
      CHECK(same_on_every_rank(world, average));
    }
  }
}

TEST_CASE("Collectives: the ring's average with float16 on the wire is within float16 rounding of the exact mean") {
  const Communicator world = Communicator::world();
  const int p = world.size();
  for (const std::int64_t n : awkward_sizes(p)) {
    CAPTURE(n);
    // Values in [10000, 20000]: with 4 ranks most sums pass float16's
    // largest, 65504, while the partial sums on the wire (of at most 3
    // ranks) and the mean do not; the average is taken before the rounding.
    const auto shifted = [](std::vector<float> values) {
      for (float& value : values) value = 10000.0f + 10000.0f * std::abs(value);
      return values;
    };
    std::vector<float> data = shifted(rank_data(world.rank(), n));
    allreduce(world, data, AllreduceAlgorithm::ring, WireFormat::float16, ReduceOp::average);
    std::vector<double> mean(static_cast<std::size_t>(n), 0.0);
    for (int r = 0; r < p; ++r) {
      const std::vector<float> theirs = shifted(rank_data(r, n));
      for (std::size_t i = 0; i < mean.size(); ++i) mean[i] += theirs[i] / static_cast<double>(p);
    }
    // Hop k rounds a partial sum of k ranks (below 20000 k) to 11 bits, the
    // p-1 hops' errors are divided by p with the sum, and the mean is
    // rounded once more: 20000 2^-11 ((p-1)/2 + 1) at most.
    const double bound = 20000.0 / 2048.0 * ((p - 1) / 2.0 + 1.0);
    CHECK(test::all_close(data, std::vector<float>(mean.begin(), mean.end()), bound, 0.0));
    CHECK(same_on_every_rank(world, data));
  }
}

TEST_CASE("Collectives: the hierarchical allreduce sums like MPI_Allreduce whatever the ranks' nodes") {
  // Nodes made up by splitting the job, so that one host tries the layouts
  // of a cluster: one node, a node per rank, p-1 ranks and 1 (uneven), and
  // ranks alternating between two nodes (a node's ranks need not be
  // consecutive). Only the leaders' ring crosses between the made-up nodes:
  // 2 n (N-1) floats over the N leaders together, as for any ring.
  const Communicator world = Communicator::world();
  const int p = world.size(), r = world.rank();
  const float inverse = 1.0f / static_cast<float>(p);
  for (const auto& entry : std::vector<std::pair<const char*, int>>{
           {"one node", 0}, {"a node per rank", r}, {"p-1 and 1", r == p - 1 ? 1 : 0}, {"alternating", r % 2}}) {
    const char* layout = entry.first;  // not a structured binding: doctest's CAPTURE takes it in a lambda
    const int color = entry.second;
    const Communicator node = world.split(color, r);
    const Communicator leaders = world.split(node.rank() == 0 ? 0 : 1, r);
    const int nodes = node.rank() == 0 ? leaders.size() : 0;
    for (const std::int64_t n : awkward_sizes(p)) {
      CAPTURE(layout);
      CAPTURE(n);
      std::vector<float> data = rank_data(r, n);
      std::vector<float> reference = data;
      const std::int64_t across_before = leaders.bytes_sent();
      hierarchical_allreduce(world, node, leaders, data);
      double across = static_cast<double>(node.rank() == 0 ? leaders.bytes_sent() - across_before : 0);
      world.sum_doubles(std::span<double>(&across, 1));
      builtin_allreduce(world, reference);
      CHECK(test::all_close(data, exact_sum(p, n), 1e-6, 1e-5));
      CHECK(test::all_close(data, reference, 1e-6, 1e-5));
      CHECK(same_on_every_rank(world, data));
      if (node.rank() == 0) CHECK(across == 2.0 * (nodes - 1) * static_cast<double>(n) * sizeof(float));

      std::vector<float> average = rank_data(r, n);
      hierarchical_allreduce(world, node, leaders, average, ReduceOp::average);
      std::size_t differing = 0;
      for (std::size_t i = 0; i < average.size(); ++i) differing += average[i] != data[i] * inverse ? 1 : 0;
      CHECK(differing == 0);
    }
  }
}

TEST_CASE("Collectives: shm keeps one window per communicator, so split groups reduce independently") {
  const Communicator world = Communicator::world();
  if (world.local_size() < world.size()) return test::skip("the ranks are on several nodes: no shm window spans them");
  const Communicator half = world.split(world.rank() % 2, world.rank());
  for (const std::int64_t n : {std::int64_t{5}, std::int64_t{1000003}, std::int64_t{7}}) {
    CAPTURE(n);
    // Interleaved with the world's window: each call on `half` must use its own.
    std::vector<float> mine = rank_data(world.rank(), n);
    shared_memory_allreduce(world, mine);
    CHECK(test::all_close(mine, exact_sum(world.size(), n), 1e-6, 1e-5));

    std::vector<float> group = rank_data(half.rank(), n);
    shared_memory_allreduce(half, group);
    CHECK(test::all_close(group, exact_sum(half.size(), n), 1e-6, 1e-5));
    CHECK(same_on_every_rank(half, group));
  }
}

TEST_CASE("Collectives: allreduce of a tensor sums in place") {
  const Communicator world = Communicator::world();
  const Tensor tensor = from_vector(rank_data(world.rank(), 35), {5, 7});
  allreduce(world, tensor, AllreduceAlgorithm::ring);
  CHECK(tensor.shape() == Shape{5, 7});
  CHECK(test::all_close(tensor.to_vector<float>(), exact_sum(world.size(), 35), 1e-6, 1e-5));
  CHECK(test::throws_error_mentioning([&] { allreduce(world, zeros({3}, {DType::Int32}), AllreduceAlgorithm::ring); },
                                      {"float32", "int32"}));
}

TEST_CASE("Collectives: a CUDA tensor is staged through the host and summed as its CPU twin, by every algorithm" *
          doctest::test_suite("cuda")) {
  const Communicator world = Communicator::world();
  if (!test::every_rank_has_a_gpu(world)) return test::skip("a rank has no CUDA device");
  const Device gpu = cuda(world.local_rank() % device_count(DeviceType::CUDA));  // ranks may share one
  for (const AllreduceAlgorithm algorithm : all_allreduce_algorithms()) {
    for (const std::int64_t n : {std::int64_t{1}, std::int64_t{7 * world.size() + 3}, std::int64_t{1000003}}) {
      CAPTURE(algorithm_name(algorithm));
      CAPTURE(n);
      const Tensor on_gpu = from_vector(rank_data(world.rank(), n), {n}).to(gpu);
      const Tensor on_cpu = from_vector(rank_data(world.rank(), n), {n});
      allreduce(world, on_gpu, algorithm);
      allreduce(world, on_cpu, algorithm);
      CHECK(on_gpu.device() == gpu);
      CHECK(on_gpu.to(cpu()).to_vector<float>() == on_cpu.to_vector<float>());  // the same sums of the same bytes
    }
  }
}

namespace {

// The algorithms that have a reduce-scatter and an allgather of their own.
const std::vector<AllreduceAlgorithm> kHalves{AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd,
                                              AllreduceAlgorithm::builtin};

std::vector<float> chunk_of(const std::vector<float>& values, const ChunkRange& chunk) {
  return {values.begin() + chunk.begin, values.begin() + chunk.end};
}

}  // namespace

TEST_CASE("Collectives: every reduce-scatter leaves rank r's chunk r summed, as MPI_Reduce_scatter does") {
  const Communicator world = Communicator::world();
  for (const AllreduceAlgorithm algorithm : kHalves) {
    for (const std::int64_t n : awkward_sizes(world.size())) {
      CAPTURE(algorithm_name(algorithm));
      CAPTURE(n);
      const ChunkRange mine = chunk_range(n, world.size(), world.rank());
      std::vector<float> data = rank_data(world.rank(), n);
      std::vector<float> reference = data;
      reduce_scatter(world, data, algorithm);
      builtin_reduce_scatter(world, reference);
      CHECK(test::all_close(chunk_of(data, mine), chunk_of(exact_sum(world.size(), n), mine), 1e-6, 1e-5));
      CHECK(test::all_close(chunk_of(data, mine), chunk_of(reference, mine), 1e-6, 1e-5));
      // The average: the same sum times 1/p, bit for bit.
      std::vector<float> average = rank_data(world.rank(), n);
      reduce_scatter(world, average, algorithm, ReduceOp::average);
      const float inverse = 1.0f / static_cast<float>(world.size());
      std::size_t differing = 0;
      for (std::int64_t i = mine.begin; i < mine.end; ++i) {
        differing += average[static_cast<std::size_t>(i)] != data[static_cast<std::size_t>(i)] * inverse ? 1 : 0;
      }
      CHECK(differing == 0);
    }
  }
}

TEST_CASE("Collectives: every allgather gives every rank every rank's chunk, bit for bit") {
  const Communicator world = Communicator::world();
  for (const AllreduceAlgorithm algorithm : kHalves) {
    for (const std::int64_t n : awkward_sizes(world.size())) {
      CAPTURE(algorithm_name(algorithm));
      CAPTURE(n);
      std::vector<float> expected(static_cast<std::size_t>(n));
      for (int r = 0; r < world.size(); ++r) {
        const ChunkRange chunk = chunk_range(n, world.size(), r);
        const auto data = rank_data(r, n);
        std::copy(data.begin() + chunk.begin, data.begin() + chunk.end, expected.begin() + chunk.begin);
      }
      std::vector<float> data(static_cast<std::size_t>(n), -7.0f);
      const ChunkRange mine = chunk_range(n, world.size(), world.rank());
      std::copy(expected.begin() + mine.begin, expected.begin() + mine.end, data.begin() + mine.begin);
      allgather(world, data, algorithm);
      CHECK(data == expected);
    }
  }
}

TEST_CASE("Collectives: our reduce-scatter then allgather is our allreduce, bit for bit") {
  const Communicator world = Communicator::world();
  for (const AllreduceAlgorithm algorithm : {AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd}) {
    for (const std::int64_t n : awkward_sizes(world.size())) {
      CAPTURE(algorithm_name(algorithm));
      CAPTURE(n);
      for (const ReduceOp op : {ReduceOp::sum, ReduceOp::average}) {
        std::vector<float> halves = rank_data(world.rank(), n);
        std::vector<float> whole = halves;
        reduce_scatter(world, halves, algorithm, op);
        allgather(world, halves, algorithm);
        allreduce(world, whole, algorithm, WireFormat::float32, op);
        CHECK(halves == whole);
      }
    }
  }
}

TEST_CASE("Collectives: an algorithm without a reduce-scatter or an allgather of its own is refused by name") {
  const Communicator world = Communicator::world();
  std::vector<float> data(5, 1.0f);
  for (const AllreduceAlgorithm algorithm : {AllreduceAlgorithm::tree, AllreduceAlgorithm::naive,
                                             AllreduceAlgorithm::shm, AllreduceAlgorithm::hierarchical}) {
    CHECK(test::throws_error_mentioning([&] { reduce_scatter(world, data, algorithm); },
                                        {"reduce_scatter", algorithm_name(algorithm), "ring, rhd or builtin"}));
    CHECK(test::throws_error_mentioning([&] { allgather(world, data, algorithm); },
                                        {"allgather", algorithm_name(algorithm), "ring, rhd or builtin"}));
  }
}

TEST_CASE("Collectives: tree broadcast copies the root's buffer to every rank, for every root") {
  const Communicator world = Communicator::world();
  for (int root = 0; root < world.size(); ++root) {
    for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{300001}}) {
      CAPTURE(root);
      CAPTURE(n);
      std::vector<float> data = rank_data(world.rank(), n);
      tree_broadcast(world, data, root);
      CHECK(data == rank_data(root, n));
    }
  }
}

TEST_CASE("Collectives: chunk_range cuts n into parts whose sizes differ by at most one") {
  for (const std::int64_t n : {0, 1, 2, 3, 10, 11, 1000003}) {
    for (const int parts : {1, 2, 3, 4, 7}) {
      std::int64_t next = 0, smallest = n, largest = 0;
      for (int i = 0; i < parts; ++i) {
        const ChunkRange chunk = chunk_range(n, parts, i);
        CHECK(chunk.begin == next);
        next = chunk.end;
        smallest = std::min(smallest, chunk.size());
        largest = std::max(largest, chunk.size());
      }
      CHECK(next == n);
      CHECK(largest - smallest <= 1);
    }
  }
}

TEST_CASE("Collectives: algorithms are chosen by name and an unknown name lists the known ones") {
  for (const AllreduceAlgorithm algorithm : all_allreduce_algorithms()) {
    CHECK(parse_allreduce(algorithm_name(algorithm)) == algorithm);
  }
  CHECK(test::throws_error_mentioning([] { parse_allreduce("butterfly"); }, {"butterfly", "ring", "rhd", "builtin"}));
}

TEST_CASE(
    "Collectives: ring allreduce with float16 on the wire is within float16 rounding and the same on every rank") {
  const Communicator world = Communicator::world();
  for (const std::int64_t n : awkward_sizes(world.size())) {
    CAPTURE(n);
    std::vector<float> data = rank_data(world.rank(), n);
    allreduce(world, data, AllreduceAlgorithm::ring, WireFormat::float16);
    // Each of the p-1 hops and the final broadcast rounds a partial sum of
    // magnitude <= p to 11 significant bits: at most p · p · 2^-11 off.
    const double bound = static_cast<double>(world.size() * world.size()) / 2048.0;
    CHECK(test::all_close(data, exact_sum(world.size(), n), bound, 0.0));
    CHECK(same_on_every_rank(world, data));
  }
  std::vector<float> data(5, 1.0f);
  CHECK(test::throws_error_mentioning([&] { allreduce(world, data, AllreduceAlgorithm::rhd, WireFormat::float16); },
                                      {"float16", "ring", "rhd"}));
}
