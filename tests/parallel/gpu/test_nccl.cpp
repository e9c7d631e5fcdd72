// NcclCommunicator, the collectives and DataParallel's NCCL path (sharded
// too), under mpiexec with one GPU per rank: with 2 ranks, and with 1 so
// that a machine of one GPU runs them too. The program exits 77 (ctest:
// skipped) unless every rank has a GPU of its own (mpi_main.cpp,
// DDL_MPI_TESTS_NEED_GPU).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/parallel/collectives/collectives.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/strategies/sharding.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;

using ddl::test::rank_data;

// Each case makes (collectively) and destroys its own NCCL communicator,
// so none outlives main() into the CUDA runtime's teardown.

namespace {

// Empty, one value, fewer than the ranks, chunks of unequal sizes, and
// over 3 MiB (several of NCCL's chunks).
std::vector<std::int64_t> awkward_sizes(int p) { return {0, 1, p - 1, 7 * p + 3, (3 << 20) / 4 + 5}; }

}  // namespace

TEST_CASE("NCCL: allreduce sums awkward sizes like MPI_Allreduce") {
  const Communicator world = Communicator::world();
  const NcclCommunicator nccl = NcclCommunicator::create(world);
  const Device gpu = cuda(nccl.device());
  const int p = world.size();
  for (const std::int64_t n : awkward_sizes(p)) {
    CAPTURE(n);
    std::vector<float> expected = rank_data(world.rank(), n);
    const Tensor tensor = from_vector(expected, {n}).to(gpu);
    nccl.allreduce(tensor);
    builtin_allreduce(world, expected);
    CHECK(test::all_close(tensor.to_vector<float>(), expected, 1e-6, 1e-5));
  }
}

TEST_CASE("NCCL: broadcast from every root, and send/recv between neighbours") {
  const Communicator world = Communicator::world();
  const NcclCommunicator nccl = NcclCommunicator::create(world);
  const Device gpu = cuda(nccl.device());
  for (int root = 0; root < world.size(); ++root) {
    const Tensor tensor = from_vector(rank_data(world.rank(), 1001), {7, 11, 13}).to(gpu);
    nccl.broadcast(tensor, root);
    CHECK(tensor.to_vector<float>() == rank_data(root, 1001));
  }
  if (world.size() == 1) return;  // a lone rank has no neighbour to send to
  // Even ranks send first, odd ranks receive first: the calls block.
  const int right = (world.rank() + 1) % world.size(), left = (world.rank() + world.size() - 1) % world.size();
  const Tensor mine = from_vector(rank_data(world.rank(), 333), {333}).to(gpu);
  const Tensor theirs = zeros({333}, {DType::Float32, gpu, false});
  if (world.rank() % 2 == 0) {
    nccl.send(mine, right);
    nccl.recv(theirs, left);
  } else {
    nccl.recv(theirs, left);
    nccl.send(mine, right);
  }
  CHECK(theirs.to_vector<float>() == rank_data(left, 333));
}

TEST_CASE("NCCL: sendrecv lets every rank send first, around a ring of awkward sizes") {
  const Communicator world = Communicator::world();
  const NcclCommunicator nccl = NcclCommunicator::create(world);
  const Device gpu = cuda(nccl.device());
  const int p = world.size(), r = world.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  CHECK(test::throws_error_mentioning([&] { nccl.sendrecv(zeros({4}), right, zeros({4}), left); },
                                      {"sendrecv", "cuda:", "cpu:0"}));
  if (p == 1) return;  // a lone rank has no neighbour to exchange with
  // What rank `from` sends has its own size, so a mismatch would show.
  const auto size_of = [](int from) { return std::int64_t{(1 << 18) + 7 * from + 1}; };
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    const Tensor mine = from_vector(rank_data(r + 10 * round, size_of(r)), {size_of(r)}).to(gpu);
    const Tensor theirs = zeros({size_of(left)}, {DType::Float32, gpu, false});
    nccl.sendrecv(mine, right, theirs, left);
    CHECK(theirs.to_vector<float>() == rank_data(left + 10 * round, size_of(left)));
  }
}

TEST_CASE("NCCL: communicators made and torn down in turn, and two alive at once, each reduce on their own") {
  const Communicator world = Communicator::world();
  const std::int64_t n = 1000;
  const std::vector<float> sum = [&] {
    std::vector<float> values = rank_data(world.rank(), n);
    builtin_allreduce(world, values);
    return values;
  }();
  for (int round = 0; round < 4; ++round) {  // each destroyed at the end of its round
    CAPTURE(round);
    const NcclCommunicator nccl = NcclCommunicator::create(world);
    const Tensor tensor = from_vector(rank_data(world.rank(), n), {n}).to(cuda(nccl.device()));
    allreduce(nccl, tensor, round % 2 == 0 ? AllreduceAlgorithm::ring : AllreduceAlgorithm::builtin);
    CHECK(test::all_close(tensor.to_vector<float>(), sum, 1e-6, 1e-5));
  }
  std::optional<NcclCommunicator> first = NcclCommunicator::create(world);
  const NcclCommunicator second = NcclCommunicator::create(world);
  const Tensor a = from_vector(rank_data(world.rank(), n), {n}).to(cuda(second.device()));
  const Tensor b = from_vector(rank_data(world.rank(), n), {n}).to(cuda(second.device()));
  first->allreduce(a);
  first.reset();  // the other goes on alone
  second.allreduce(b);
  CHECK(test::all_close(a.to_vector<float>(), sum, 1e-6, 1e-5));
  CHECK(test::all_close(b.to_vector<float>(), sum, 1e-6, 1e-5));
}

TEST_CASE("NCCL: tensors on the wrong device or of the wrong dtype are refused, naming them") {
  const NcclCommunicator nccl = NcclCommunicator::create(Communicator::world());
  const Device gpu = cuda(nccl.device());
  CHECK(test::throws_error_mentioning([&] { nccl.allreduce(zeros({4})); }, {"allreduce", "cuda:", "cpu:0"}));
  CHECK(test::throws_error_mentioning([&] { nccl.recv(zeros({4}), 0); }, {"recv", "cuda:", "cpu:0"}));
  const Tensor ints = zeros({4}, {DType::Int32, gpu, false});
  const Tensor floats = zeros({4}, {DType::Float32, gpu, false});
  CHECK(test::throws_error_mentioning([&] { nccl.allreduce(ints); }, {"float32", "int32"}));
  CHECK(test::throws_error_mentioning([&] { nccl.broadcast(floats, 99); }, {"root 99"}));
  CHECK(test::throws_error_mentioning([&] { nccl.send(floats, nccl.rank()); },
                                      {"cannot send to rank " + std::to_string(nccl.rank())}));
}

TEST_CASE("NCCL: ring, rhd, tree and naive on the GPU give their host twins' bits, as sums and averages") {
  const Communicator world = Communicator::world();
  const NcclCommunicator nccl = NcclCommunicator::create(world);
  const Device gpu = cuda(nccl.device());
  const int p = world.size();
  for (const AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd, AllreduceAlgorithm::tree, AllreduceAlgorithm::naive}) {
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::average}) {
      for (const std::int64_t n : awkward_sizes(p)) {
        CAPTURE(algorithm_name(algorithm));
        CAPTURE(op == ReduceOp::sum ? "sum" : "average");
        CAPTURE(n);
        std::vector<float> host = rank_data(world.rank(), n);
        const Tensor tensor = from_vector(host, {n}).to(gpu);
        allreduce(nccl, tensor, algorithm, op);
        allreduce(world, host, algorithm, WireFormat::float32, op);
        // The same adds of the same values in the same order, by the same
        // functor: the GPU's kernels and the host's loop agree bit for bit.
        CHECK(tensor.device() == gpu);
        CHECK(tensor.to_vector<float>() == host);
      }
    }
  }
}

TEST_CASE("NCCL: builtin averages with ncclAvg, the device allreduce refuses shm and tensors it cannot reduce") {
  const Communicator world = Communicator::world();
  const NcclCommunicator nccl = NcclCommunicator::create(world);
  const Device gpu = cuda(nccl.device());
  const std::int64_t n = 7 * world.size() + 3;
  std::vector<float> expected = rank_data(world.rank(), n);
  const Tensor tensor = from_vector(expected, {n}).to(gpu);
  allreduce(nccl, tensor, AllreduceAlgorithm::builtin, ReduceOp::average);
  allreduce(world, expected, AllreduceAlgorithm::builtin, WireFormat::float32, ReduceOp::average);
  CHECK(test::all_close(tensor.to_vector<float>(), expected, 1e-6, 1e-5));
  CHECK(test::throws_error_mentioning([&] { allreduce(nccl, tensor, AllreduceAlgorithm::shm); },
                                      {"shm", "no GPU form", "ring"}));
  CHECK(test::throws_error_mentioning([&] { allreduce(nccl, zeros({4}), AllreduceAlgorithm::ring); },
                                      {"cuda:", "cpu:0", "[4]"}));
  CHECK(test::throws_error_mentioning(
      [&] {
        allreduce(nccl, zeros({4}, {DType::Int32, gpu, false}), AllreduceAlgorithm::ring);
      },
      {"float32", "int32"}));
}

TEST_CASE("NCCL: reduce-scatter and allgather on the GPU leave their host twins' chunks (builtin to rounding)") {
  const Communicator world = Communicator::world();
  const NcclCommunicator nccl = NcclCommunicator::create(world);
  const Device gpu = cuda(nccl.device());
  const int p = world.size();
  for (const AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd, AllreduceAlgorithm::builtin}) {
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::average}) {
      for (const std::int64_t n : awkward_sizes(p)) {
        CAPTURE(algorithm_name(algorithm));
        CAPTURE(op == ReduceOp::sum ? "sum" : "average");
        CAPTURE(n);
        const ChunkRange mine = chunk_range(n, p, world.rank());
        const auto chunk_of = [&](const std::vector<float>& values) {
          return std::vector<float>(values.begin() + mine.begin, values.begin() + mine.end);
        };
        std::vector<float> host = rank_data(world.rank(), n);
        const Tensor tensor = from_vector(host, {n}).to(gpu);
        reduce_scatter(nccl, tensor, algorithm, op);
        reduce_scatter(world, host, algorithm, op);
        if (algorithm == AllreduceAlgorithm::builtin) {
          // NCCL's and MPI's own sums need not add in one order.
          CHECK(test::all_close(chunk_of(tensor.to_vector<float>()), chunk_of(host), 1e-6, 1e-5));
        } else {
          CHECK(chunk_of(tensor.to_vector<float>()) == chunk_of(host));
        }
        // Every rank's chunk r copied into chunk r everywhere: the same bits.
        std::vector<float> gathered = rank_data(world.rank(), n);
        const Tensor pieces = from_vector(gathered, {n}).to(gpu);
        allgather(nccl, pieces, algorithm);
        allgather(world, gathered, algorithm);
        CHECK(pieces.device() == gpu);
        CHECK(pieces.to_vector<float>() == gathered);
      }
    }
  }
  const Tensor tensor = zeros({7}, {DType::Float32, gpu, false});
  CHECK(test::throws_error_mentioning([&] { allgather(nccl, tensor, AllreduceAlgorithm::tree); },
                                      {"tree", "no allgather of its own"}));
  CHECK(test::throws_error_mentioning([&] { reduce_scatter(nccl, zeros({4}), AllreduceAlgorithm::ring); },
                                      {"reduce_scatter", "cpu:0", "[4]"}));
}

TEST_CASE("NCCL: sharded DataParallel on the GPU trains DataParallel's weights bit for bit over NCCL") {
  const Communicator world = Communicator::world();
  const Device gpu = cuda(world.local_rank());
  const std::int64_t batch = test::kGlobalBatch / world.size();
  const std::uint64_t seed = 5 + 100 * static_cast<std::uint64_t>(world.rank());
  for (const AllreduceAlgorithm algorithm : {AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd}) {
    const auto options = [&](Sharding sharding) {
      return DataParallelOptions{
          .algorithm = algorithm, .bucket_bytes = 1024, .first_bucket_bytes = 32, .sharding = sharding};
    };
    const std::vector<float> expected = test::train(std::make_shared<DataParallel>(world, options(Sharding::none)),
                                                    batch, test::sgd_with_momentum(), seed, gpu);
    for (const Sharding sharding : {Sharding::optimizer, Sharding::gradients, Sharding::parameters}) {
      CAPTURE(algorithm_name(algorithm));
      CAPTURE(sharding_name(sharding));
      const auto strategy = std::make_shared<DataParallel>(world, options(sharding));
      CHECK(test::train(strategy, batch, test::sgd_with_momentum(), seed, gpu) == expected);
      CHECK(strategy->reduces_on_gpu());
    }
  }
}

TEST_CASE("NCCL: DataParallel on the GPU trains as DataParallel on the CPU, with NCCL's allreduce and with ours") {
  const Communicator world = Communicator::world();
  const Device gpu = cuda(world.local_rank());
  const std::int64_t batch = test::kGlobalBatch / world.size();
  const std::uint64_t seed = 5 + 100 * static_cast<std::uint64_t>(world.rank());
  for (const AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::builtin, AllreduceAlgorithm::ring, AllreduceAlgorithm::rhd, AllreduceAlgorithm::tree}) {
    CAPTURE(algorithm_name(algorithm));
    const DataParallelOptions options{.algorithm = algorithm, .bucket_bytes = 1024, .first_bucket_bytes = 32};
    const auto strategy = std::make_shared<DataParallel>(world, options);
    const std::vector<float> on_gpu = test::train(strategy, batch, test::sgd_with_momentum(), seed, gpu);
    CHECK(strategy->reduces_on_gpu());
    for (const GradientBucket& bucket : strategy->buckets()) CHECK(bucket.buffer.device() == gpu);
    const std::vector<float> on_cpu =
        test::train(std::make_shared<DataParallel>(world, options), batch, test::sgd_with_momentum(), seed);
    // cuDNN's and Eigen's sums differ in order: the runs agree to rounding.
    CHECK(test::max_relative_difference(on_gpu, on_cpu) <= 1e-4);
  }
}
