// The Communicator (parallel/communication/communicator.hpp) under mpiexec with 2, 3 and 4
// ranks: ranks and node-local ranks, split, messages of tensors and bytes,
// the sums and gathers used for metrics and negotiation.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/parallel/communication/agreement.hpp>
#include <ddl/parallel/communication/communicator.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>
#include <ddl/parallel/config.hpp>

#include "parallel/training_fixtures.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::parallel::Communicator;
using ddl::parallel::NcclCommunicator;
using ddl::parallel::RankProblem;

namespace {

std::vector<int> gather_ints(const Communicator& comm, int value) {
  const auto bytes = comm.allgather_bytes(std::as_bytes(std::span<const int>(&value, 1)));
  std::vector<int> values(static_cast<std::size_t>(comm.size()));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

}  // namespace

// Every rank's hostname, in rank order.
std::vector<std::string> gather_hostnames(const Communicator& comm) {
  constexpr std::size_t kBytes = 256;
  std::array<char, kBytes> mine{};
  ::gethostname(mine.data(), kBytes - 1);
  const std::vector<std::byte> all = comm.allgather_bytes(std::as_bytes(std::span<const char>(mine)));
  std::vector<std::string> hosts;
  for (int r = 0; r < comm.size(); ++r) {
    hosts.emplace_back(reinterpret_cast<const char*>(all.data()) + static_cast<std::size_t>(r) * kBytes);
  }
  return hosts;
}

// On one machine every rank is node-local; on several (scripts/cluster/
// simulate.sh gives each simulated node its own hostname) the node-local
// ranks are the ranks on this host, numbered in rank order.
TEST_CASE("Communicator: ranks are 0..size-1, node-local ranks are the ranks on this host, in rank order") {
  const Communicator world = Communicator::world();
  REQUIRE(world.size() >= 2);
  std::vector<int> expected(static_cast<std::size_t>(world.size()));
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(gather_ints(world, world.rank()) == expected);
  const std::vector<std::string> hosts = gather_hostnames(world);
  const std::string& here = hosts[static_cast<std::size_t>(world.rank())];
  for (int r = 0; r < world.size(); ++r) CHECK(world.host(r) == hosts[static_cast<std::size_t>(r)]);
  CHECK(test::throws_error_mentioning([&] { world.host(world.size()); }, {"Communicator::host", "outside"}));
  CHECK(world.local_rank() == std::count(hosts.begin(), hosts.begin() + world.rank(), here));
  CHECK(world.local_size() == std::count(hosts.begin(), hosts.end(), here));
  // describe_nodes names every host; on one machine, one run of every rank
  // (the simulated cluster's test checks the names of several nodes).
  const std::string nodes = world.describe_nodes();
  for (const std::string& host : hosts) CHECK(nodes.find(" on " + host) != std::string::npos);
  if (std::count(hosts.begin(), hosts.end(), here) == world.size()) {
    CHECK(nodes == fmt::format("ranks 0-{} on {}", world.size() - 1, here));
  }
}

TEST_CASE("Communicator: node() holds this host's ranks, across_nodes() one rank of each host per local rank") {
  const Communicator world = Communicator::world();
  const std::vector<std::string> hosts = gather_hostnames(world);
  const std::string& here = hosts[static_cast<std::size_t>(world.rank())];
  std::vector<int> on_this_node, same_local_rank;
  std::vector<int> local_rank_of(hosts.size());
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    local_rank_of[r] =
        static_cast<int>(std::count(hosts.begin(), hosts.begin() + static_cast<std::ptrdiff_t>(r), hosts[r]));
    if (hosts[r] == here) on_this_node.push_back(static_cast<int>(r));
    if (local_rank_of[r] == world.local_rank()) same_local_rank.push_back(static_cast<int>(r));
  }
  const Communicator node = world.node();
  CHECK(node.size() == world.local_size());
  CHECK(node.rank() == world.local_rank());
  CHECK(gather_ints(node, world.rank()) == on_this_node);
  const Communicator across = world.across_nodes();
  CHECK(gather_ints(across, world.rank()) == same_local_rank);
  // Messages on either level count as the job's own: the same counter.
  const std::int64_t before = world.bytes_sent();
  std::vector<std::byte> bytes(12), received(12);
  const int next = (across.rank() + 1) % across.size(), previous = (across.rank() + across.size() - 1) % across.size();
  world.across_nodes().sendrecv(bytes, next, received, previous);
  CHECK(world.bytes_sent() - before == 12);
}

TEST_CASE("Communicator: split by parity groups even and odd ranks, ordered by key") {
  const Communicator world = Communicator::world();
  const int color = world.rank() % 2;
  const Communicator half = world.split(color, -world.rank());  // reversed order
  CHECK(half.size() == (world.size() + 1 - color) / 2);
  const std::vector<int> members = gather_ints(half, world.rank());
  for (std::size_t i = 0; i + 1 < members.size(); ++i) CHECK(members[i] > members[i + 1]);
  for (const int member : members) CHECK(member % 2 == color);
  // What messages name: each member's job-wide rank, and its host.
  for (int r = 0; r < half.size(); ++r) {
    CHECK(half.world_rank(r) == members[static_cast<std::size_t>(r)]);
    CHECK(half.host(r) == world.host(members[static_cast<std::size_t>(r)]));
  }
  CHECK(world.world_rank(world.rank()) == world.rank());
}

TEST_CASE("Communicator: a tensor sent around the ring arrives intact, shape and values") {
  const Communicator world = Communicator::world();
  const int right = (world.rank() + 1) % world.size(), left = (world.rank() + world.size() - 1) % world.size();
  Generator generator(100 + static_cast<std::uint64_t>(world.rank()));
  const Tensor mine = uniform({3, 7, 5}, -1.0f, 1.0f, {}, &generator);
  const Tensor received = zeros({3, 7, 5});
  if (world.rank() % 2 == 0) {
    world.send(mine, right, 7);
    world.recv(received, left, 7);
  } else {
    world.recv(received, left, 7);
    world.send(mine, right, 7);
  }
  Generator left_generator(100 + static_cast<std::uint64_t>(left));
  CHECK(received.to_vector<float>() == uniform({3, 7, 5}, -1.0f, 1.0f, {}, &left_generator).to_vector<float>());
}

TEST_CASE("Communicator: a message longer than the receive buffer is an error naming both ranks") {
  const Communicator world = Communicator::world();
  if (world.rank() > 1) return;
  if (world.rank() == 0) {
    world.send(ones({5}), 1, 9);
  } else {
    const Tensor small = zeros({4});
    // The peer named with its host: where it runs is what a user looks at next.
    CHECK(test::throws_error_mentioning(
        [&] { world.recv(small, 0, 9); },
        {fmt::format("rank 1: receive of 16 bytes (tag 9) with rank 0 on {} failed", world.host(0)), "truncated"}));
  }
}

TEST_CASE("Communicator: sendrecv passes 1 MiB around the ring at once, a shorter or longer message names the sender") {
  const Communicator world = Communicator::world();
  const int right = (world.rank() + 1) % world.size(), left = (world.rank() + world.size() - 1) % world.size();
  // Every rank sends before it receives: with blocking sends of this size
  // (past MPI's eager limit) the ring would deadlock.
  const std::vector<float> mine = ddl::test::rank_data(world.rank(), (1 << 20) / 4 + 3);
  std::vector<float> received(mine.size());
  world.sendrecv(std::as_bytes(std::span<const float>(mine)), right, std::as_writable_bytes(std::span<float>(received)),
                 left, 11);
  CHECK(received == ddl::test::rank_data(left, static_cast<std::int64_t>(mine.size())));

  if (world.rank() > 1) return;
  const int other = 1 - world.rank();
  std::array<std::byte, 8> buffer{};
  const auto four = std::span<const std::byte>(buffer).first(4);
  std::array<std::byte, 4> incoming{};
  if (world.rank() == 0) {
    CHECK(test::throws_error_mentioning([&] { world.sendrecv(four, other, buffer, other, 12); },
                                        {"expected 8 bytes from rank 1", "received 4"}));
    world.sendrecv(buffer, other, incoming, other, 13);
  } else {
    world.sendrecv(four, other, incoming, other, 12);
    CHECK(test::throws_error_mentioning(
        [&] { world.sendrecv(four, other, incoming, other, 13); },
        {fmt::format("rank 1: sendrecv of 4 bytes received (tag 13) with rank 0 on {} failed", world.host(0)),
         "truncated"}));
  }
}

TEST_CASE("Communicator: sum_doubles adds every rank's values") {
  const Communicator world = Communicator::world();
  std::vector<double> values{1.0, static_cast<double>(world.rank()), 0.5};
  world.sum_doubles(values);
  const double p = world.size();
  CHECK(values == std::vector<double>{p, p * (p - 1) / 2, 0.5 * p});
}

TEST_CASE("Communicator: broadcast_bytes copies the root's bytes to every rank") {
  const Communicator world = Communicator::world();
  for (int root = 0; root < world.size(); ++root) {
    std::vector<std::byte> bytes(13, std::byte(world.rank()));
    world.broadcast_bytes(bytes, root);
    CHECK(bytes == std::vector<std::byte>(13, std::byte(root)));
  }
  world.barrier();
}

TEST_CASE("agree_all_can_proceed: one rank's problem is an error on every rank, quoting it and naming who had it") {
  const Communicator world = Communicator::world();
  agree_all_can_proceed(world, "", "nothing wrong");  // returns on every rank
  const int last = world.size() - 1;
  const std::string problem = world.rank() == last ? "rank " + std::to_string(last) + " has no disk" : "";
  if (world.rank() == last) {
    CHECK(test::throws_error_mentioning([&] { agree_all_can_proceed(world, problem, "saving"); }, {"has no disk"}));
  } else {
    CHECK(test::throws_error_mentioning(
        [&] { agree_all_can_proceed(world, problem, "saving"); },
        {"saving: rank " + std::to_string(world.rank()), "because rank " + std::to_string(last) + " cannot",
         "rank " + std::to_string(last) + ": rank " + std::to_string(last) + " has no disk"}));
  }
  world.barrier();
}

TEST_CASE("gather_problems: every failing rank's own message reaches every rank in rank order, long ones cut") {
  const Communicator world = Communicator::world();
  CHECK(parallel::gather_problems(world, "").empty());
  // The odd ranks fail; rank 1's message is longer than the 1 KiB carried.
  std::string problem;
  if (world.rank() % 2 == 1)
    problem = "rank " + std::to_string(world.rank()) + " failed" + std::string(world.rank() == 1 ? 5000 : 0, '!');
  const std::vector<RankProblem> problems = parallel::gather_problems(world, problem);
  REQUIRE(problems.size() == static_cast<std::size_t>(world.size() / 2));
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const int rank = 2 * static_cast<int>(i) + 1;
    CHECK(problems[i].rank == rank);
    CHECK(problems[i].what.rfind("rank " + std::to_string(rank) + " failed", 0) == 0);
    CHECK(problems[i].what.size() <= 1023);
  }
  CHECK(parallel::describe_problems(problems).rfind("rank 1: rank 1 failed", 0) == 0);
  // The same message on every rank is one entry.
  const auto everywhere = parallel::gather_problems(world, "no disk");
  std::vector<std::string> ranks;
  for (int r = 0; r < world.size(); ++r) ranks.push_back(std::to_string(r));
  CHECK(parallel::describe_problems(everywhere) == fmt::format("ranks {}: no disk", fmt::join(ranks, ", ")));
}

TEST_CASE("first_disagreement: the first line that differs, with each rank's line there") {
  const Communicator world = Communicator::world();
  CHECK_FALSE(parallel::first_disagreement(world, {"--lr 1", "--seed 2"}).has_value());
  const auto disagreement =
      parallel::first_disagreement(world, {"--lr 1", "--seed " + std::to_string(world.rank() == 0 ? 1 : 2)});
  REQUIRE(disagreement.has_value());
  CHECK(disagreement->entry == 1);
  CHECK(disagreement->entries == 2);
  REQUIRE(disagreement->per_rank.size() == static_cast<std::size_t>(world.size()));
  CHECK(disagreement->per_rank[0] == "--seed 1");
  CHECK(disagreement->per_rank.back() == "--seed 2");
  // A rank with fewer lines differs where it has none.
  const auto shorter = parallel::first_disagreement(
      world, world.rank() == 0 ? std::vector<std::string>{"a"} : std::vector<std::string>{"a", "b"});
  REQUIRE(shorter.has_value());
  CHECK(shorter->per_rank[0] == "nothing (it has only 1 entries)");
}

TEST_CASE("parallel config: check_environment names a bad variable, the getters keep their default meanwhile") {
  parallel::config::check_environment();
  const std::int64_t segment = parallel::config::ring_segment_bytes();
  ::setenv("DDL_FUSION_THRESHOLD", "lots", 1);
  CHECK(test::throws_error_mentioning([] { parallel::config::check_environment(); },
                                      {"DDL_FUSION_THRESHOLD=lots", "not a positive byte count"}));
  ::unsetenv("DDL_FUSION_THRESHOLD");
  CHECK(parallel::config::ring_segment_bytes() == segment);
}

TEST_CASE("NcclCommunicator: without NCCL or without a GPU, create() says which, naming the rank") {
  const Communicator world = Communicator::world();
  if (cuda_available() && NcclCommunicator::built()) {
    return test::skip("this machine has a GPU and NCCL: ddl_mpi_nccl_tests (tests/parallel/gpu) covers this case");
  }
  const std::string rank = "rank " + std::to_string(world.rank());
  if (NcclCommunicator::built()) {
    CHECK(test::throws_error_mentioning([&] { NcclCommunicator::create(world); },
                                        {"NcclCommunicator", rank, "no CUDA device", "one GPU per rank on a node"}));
  } else {
    CHECK(test::throws_error_mentioning([&] { NcclCommunicator::create(world); },
                                        {"NcclCommunicator", rank, "without NCCL"}));
  }
}
