// An nccl-tests-style table for every allreduce algorithm (ring, rhd, tree,
// naive, shm, builtin = MPI_Allreduce), side by side in one run, for sizes
// doubling from --min-bytes to --max-bytes:
//   mpiexec -n 2 build/bench/ddl_bench_allreduce [--min-bytes 4] [--max-bytes 268435456]
// time is the median over the iterations of the slowest rank's time; algbw
// = bytes / time; busbw = algbw · 2(n-1)/n (nccl-tests' definitions, so the
// numbers compare with theirs: busbw is the link speed an optimal ring would
// need). "wrong" counts elements that differ from MPI_Allreduce's result by
// more than a few ulps.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <ddl/ddl.hpp>
#include <ddl/parallel/collectives/collectives.hpp>

using namespace ddl;
using namespace ddl::parallel;

namespace {

struct Result {
  double microseconds;
  std::int64_t wrong;
};

// The median of the per-iteration maxima over ranks.
Result measure(const Communicator& comm, AllreduceAlgorithm algorithm, std::int64_t count, double budget_seconds) {
  Generator generator(7 + static_cast<std::uint64_t>(comm.rank()));
  const std::vector<float> original =
      count > 0 ? uniform({count}, -1.0f, 1.0f, {}, &generator).to_vector<float>() : std::vector<float>{};
  std::vector<float> expected = original;
  builtin_allreduce(comm, expected);
  std::vector<float> data = original;
  allreduce(comm, data, algorithm);  // warm-up, and the result checked below
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (std::abs(data[i] - expected[i]) > 1e-5f * (1.0f + std::abs(expected[i]))) ++wrong;
  }
  std::vector<double> times;
  for (int iteration = 0; iteration < 1000; ++iteration) {
    comm.barrier();
    const auto begin = std::chrono::steady_clock::now();
    allreduce(comm, data, algorithm);
    // The slowest rank's time is the collective's: each rank fills its own
    // slot, the sum gathers them all.
    std::vector<double> slots(static_cast<std::size_t>(comm.size()), 0.0);
    slots[static_cast<std::size_t>(comm.rank())] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    comm.sum_doubles(slots);
    times.push_back(*std::max_element(slots.begin(), slots.end()));
    // Every rank decides alike: the budget check uses the shared slowest times.
    double spent = 0.0;
    for (const double t : times) spent += t;
    if (iteration >= 4 && spent > budget_seconds) break;
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2] * 1e6, wrong};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nccl-tests-style allreduce table for ddl's algorithms and MPI_Allreduce", "ddl_bench_allreduce"};
  std::int64_t min_bytes = 4, max_bytes = std::int64_t{256} << 20;
  double budget = 0.3;
  std::vector<std::string> names{"ring", "rhd", "tree", "naive", "shm", "builtin"};
  app.add_option("--min-bytes", min_bytes, "smallest message")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest message")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--budget", budget, "seconds of timed iterations per size and algorithm")->capture_default_str();
  app.add_option("--algorithms", names, "which algorithms, in column order")->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  const Communicator world = Communicator::world();
  std::vector<AllreduceAlgorithm> algorithms;
  for (const auto& name : names) algorithms.push_back(parse_allreduce(name));
  const int n = world.size();
  const double bus_factor = 2.0 * (n - 1) / n;
  if (world.rank() == 0) {
    std::printf("# ddl allreduce, %d ranks, float32 sum; time in us, algbw and busbw in GB/s\n", n);
    std::string header = fmt::format("{:>12} {:>12}", "size(B)", "count");
    for (const auto& name : names) header += fmt::format(" | {:>8} {:>9} {:>7} {:>7} {:>5}", name, "time", "algbw",
                                                         "busbw", "wrong");
    std::printf("%s\n", header.c_str());
  }
  for (std::int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const std::int64_t count = bytes / 4;
    std::string line = fmt::format("{:>12} {:>12}", bytes, count);
    for (std::size_t a = 0; a < algorithms.size(); ++a) {
      const Result result = measure(world, algorithms[a], count, budget);
      const double algbw = static_cast<double>(bytes) / (result.microseconds * 1e-6) * 1e-9;
      line += fmt::format(" | {:>8} {:>9.1f} {:>7.3f} {:>7.3f} {:>5}", "", result.microseconds, algbw,
                          algbw * bus_factor, result.wrong);
    }
    if (world.rank() == 0) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  return 0;
}
