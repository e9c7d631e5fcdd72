// An nccl-tests-style table for every allreduce algorithm (ring, rhd, tree,
// naive, shm, hierarchical, builtin = MPI_Allreduce) and a textbook ring, side by side in
// one run, for sizes doubling from --min-bytes to --max-bytes:
//   mpiexec -n 2 build/bench/ddl_bench_allreduce [--min-bytes 4] [--max-bytes 268435456]
// For each size the columns are interleaved: every iteration runs each of
// them once, in an order that rotates from iteration to iteration, so all
// see the same machine load. time is the median over the iterations (at
// least --min-iterations, more while --budget lasts) of the slowest rank's
// time; algbw = bytes / time; busbw = algbw · 2(n-1)/n
// (nccl-tests' definitions, so the numbers compare with theirs: busbw is the
// link speed an optimal ring would need). "wrong" counts elements that
// differ from MPI_Allreduce's result by more than a few ulps.
//
// With one GPU per rank, columns named gpu-ring, gpu-rhd, gpu-tree and
// gpu-naive run ddl's algorithms on a GPU tensor over NCCL's point-to-point
// messages (device-resident: sums as CUDA kernels), and nccl is
// ncclAllReduce, the yardstick there:
//   mpiexec -n 2 build/bench/ddl_bench_allreduce --algorithms gpu-ring,gpu-rhd,gpu-tree,nccl
//
// On several nodes, --interface eth0 adds a column per algorithm: the bytes
// the nodes' network interfaces sent per allreduce (each node's first rank
// reads its node's transmit counter in /proc/net/dev around every timed run; the sum over nodes, TCP's headers and the
// timing's own few small messages included): what crossed between nodes.
//
// "textbook" is the ring as textbooks write it (Patarasuk & Yuan 2009):
// n - 1 steps of one MPI_Sendrecv of a whole chunk and a vectorised add
// (reduce-scatter), then n - 1 of one MPI_Sendrecv (allgather). It is the
// yardstick ddl's ring (segmented, pipelined) must beat.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <ddl/ddl.hpp>
#include <ddl/parallel/collectives/collectives.hpp>

using namespace ddl;
using namespace ddl::parallel;

namespace {

// The textbook ring on MPI_COMM_WORLD (the bench's ranks are the world's).
void textbook_ring(std::vector<float>& data) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto count = static_cast<std::int64_t>(data.size());
  const auto first = [&](int chunk) { return count * chunk / size; };  // chunk c is [first(c), first(c + 1))
  const auto length = [&](int chunk) { return static_cast<int>(first(chunk + 1) - first(chunk)); };
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  // Kept from call to call, as ddl's ring keeps its staging buffers: a fresh
  // allocation of many MiB costs a page fault per 4 KiB on every call.
  static std::vector<float> incoming;
  incoming.resize(std::max(incoming.size(), static_cast<std::size_t>(count / size + 1)));
  for (int step = 0; step < size - 1; ++step) {
    const int send = (rank - step + size) % size, receive = (rank - step - 1 + 2 * size) % size;
    MPI_Sendrecv(data.data() + first(send), length(send), MPI_FLOAT, right, 0, incoming.data(), length(receive),
                 MPI_FLOAT, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    float* target = data.data() + first(receive);
    for (int i = 0; i < length(receive); ++i) target[i] += incoming[static_cast<std::size_t>(i)];
  }
  for (int step = 0; step < size - 1; ++step) {
    const int send = (rank + 1 - step + size) % size, receive = (rank - step + size) % size;
    MPI_Sendrecv(data.data() + first(send), length(send), MPI_FLOAT, right, 1, data.data() + first(receive),
                 length(receive), MPI_FLOAT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
}

// The round trip of one cache line between ranks 0 and 1 through a shared
// window, in ns, or NaN where they are not on one node. On a 2-vCPU VM it
// was ~55 ns while the vCPUs shared a cache and ~330 ns while they did not
// (the host moves them); shm's bandwidth follows it (docs/PERFORMANCE.md).
double cache_line_round_trip_ns() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0, size = 1, world_size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  double nanoseconds = std::nan("");
  if (size == world_size && size >= 2) {
    int* mine = nullptr;
    MPI_Win window = MPI_WIN_NULL;
    MPI_Win_allocate_shared(rank == 0 ? 64 : 0, 1, MPI_INFO_NULL, node, &mine, &window);
    MPI_Aint bytes = 0;
    int unit = 0;
    int* flag = nullptr;
    MPI_Win_shared_query(window, 0, &bytes, &unit, &flag);
    std::atomic_ref<int> line(*flag);
    if (rank == 0) line.store(0);
    MPI_Barrier(node);
    constexpr int kRounds = 20000;
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds && rank < 2; ++i) {  // rank 0 writes odd values, rank 1 answers with even ones
      if (rank == 0) line.store(2 * i + 1, std::memory_order_release);
      while (line.load(std::memory_order_acquire) != 2 * i + 2 - rank) {
      }
      if (rank == 1) line.store(2 * i + 2, std::memory_order_release);
    }
    nanoseconds = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin).count() / kRounds;
    MPI_Bcast(&nanoseconds, 1, MPI_DOUBLE, 0, node);
    MPI_Win_free(&window);
  }
  MPI_Comm_free(&node);
  return nanoseconds;
}

// A column runs on host data, or (on_gpu) on a copy of it on the rank's GPU.
struct Column {
  std::string name;
  std::function<void(std::vector<float>&)> run;
  std::function<void(const Tensor&)> run_on_gpu;
};

struct Result {
  double microseconds;
  std::int64_t wrong;
  double interface_bytes;  // per allreduce, summed over the nodes; NaN when not counted
};

// The bytes this node's `interface` has sent (its first rank reads it; the
// others, and every rank without an interface to read, return 0).
class InterfaceCounter {
 public:
  InterfaceCounter(const Communicator& comm, std::string interface)
      : interface_(std::move(interface)), counting_(comm.local_rank() == 0), where_(comm.describe()) {
    sent();  // there, or the error says where
  }
  // /proc/net/dev, not /sys/class/net: /proc shows the network namespace of
  // the process that reads it (a simulated node's), sysfs that of whoever
  // mounted it. Its line: "  eth0: <8 receive counters> <transmit bytes> ...".
  double sent() const {
    if (!counting_) return 0.0;
    std::ifstream file("/proc/net/dev");
    for (std::string line; std::getline(file, line);) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const auto first = line.find_first_not_of(' ');
      if (line.compare(first, colon - first, interface_) != 0) continue;
      std::istringstream counters(line.substr(colon + 1));
      double value = 0.0;
      for (int field = 0; field < 9 && counters >> value; ++field) {
      }
      if (counters) return value;
    }
    throw Error(fmt::format("--interface {}: no such interface in /proc/net/dev on {}", interface_, where_));
  }

 private:
  std::string interface_;
  bool counting_;
  std::string where_;
};

// Per column, the median of the per-iteration maxima over ranks, and (with
// an interface counted) the bytes the nodes sent per run.
std::vector<Result> measure(const Communicator& comm, const std::vector<Column>& columns, std::int64_t count,
                            double budget_seconds, int min_iterations, const Device& gpu,
                            const InterfaceCounter* interface) {
  Generator generator(7 + static_cast<std::uint64_t>(comm.rank()));
  const std::vector<float> original =
      count > 0 ? uniform({count}, -1.0f, 1.0f, {}, &generator).to_vector<float>() : std::vector<float>{};
  std::vector<float> expected = original;
  builtin_allreduce(comm, expected);
  std::vector<Result> results(columns.size(), Result{0.0, 0, std::nan("")});
  std::vector<double> sent(columns.size(), 0.0);
  std::vector<std::vector<float>> data(columns.size(), original);
  std::vector<Tensor> on_gpu(columns.size());
  const auto run = [&](std::size_t c) {
    if (columns[c].run_on_gpu) return columns[c].run_on_gpu(on_gpu[c]);
    columns[c].run(data[c]);
  };
  for (std::size_t c = 0; c < columns.size(); ++c) {
    if (columns[c].run_on_gpu) on_gpu[c] = from_vector(original, {count}).to(gpu);
    run(c);  // warm-up, and the result checked here
    if (columns[c].run_on_gpu) data[c] = on_gpu[c].to_vector<float>();
    for (std::size_t i = 0; i < original.size(); ++i) {
      if (std::abs(data[c][i] - expected[i]) > 1e-5f * (1.0f + std::abs(expected[i]))) ++results[c].wrong;
    }
  }
  std::vector<std::vector<double>> times(columns.size());
  double spent = 0.0;
  const double budget = budget_seconds * static_cast<double>(columns.size());
  for (int iteration = 0; iteration < 1000; ++iteration) {
    for (std::size_t k = 0; k < columns.size(); ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(iteration)) % columns.size();
      comm.barrier();
      const double sent_before = interface ? interface->sent() : 0.0;
      const auto begin = std::chrono::steady_clock::now();
      run(c);  // a GPU column returns once its result is in GPU memory
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      // The slowest rank's time is the collective's: each rank fills its
      // own slot, the sum gathers them all (and once every rank is past the
      // allreduce, every byte of it has left its interface).
      std::vector<double> slots(static_cast<std::size_t>(comm.size()), 0.0);
      slots[static_cast<std::size_t>(comm.rank())] = seconds;
      comm.sum_doubles(slots);
      if (interface) sent[c] += interface->sent() - sent_before;
      times[c].push_back(*std::max_element(slots.begin(), slots.end()));
      spent += times[c].back();  // the same on every rank, so all stop together
    }
    if (iteration + 1 >= min_iterations && spent > budget) break;
  }
  if (interface) comm.sum_doubles(sent);
  for (std::size_t c = 0; c < columns.size(); ++c) {
    if (interface) results[c].interface_bytes = sent[c] / static_cast<double>(times[c].size());
    std::sort(times[c].begin(), times[c].end());
    results[c].microseconds = times[c][times[c].size() / 2] * 1e6;
  }
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nccl-tests-style allreduce table for ddl's algorithms and MPI_Allreduce", "ddl_bench_allreduce"};
  std::int64_t min_bytes = 4, max_bytes = std::int64_t{256} << 20;
  double budget = 0.3;
  int min_iterations = 5;
  std::vector<std::string> names{"ring", "textbook", "rhd", "tree", "naive", "shm", "builtin"};
  const std::vector<std::string> gpu_names{"gpu-ring", "gpu-rhd", "gpu-tree", "gpu-naive", "nccl"};
  const auto on_gpu = [&](const std::string& name) {
    return std::find(gpu_names.begin(), gpu_names.end(), name) != gpu_names.end();
  };
  app.add_option("--min-bytes", min_bytes, "smallest message")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest message")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--budget", budget, "seconds of timed iterations per size and column")->capture_default_str();
  app.add_option("--min-iterations", min_iterations,
                 "timed iterations per size at least, whatever the budget (more steady medians of large messages)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  std::string interface;
  app.add_option("--interface", interface,
                 "on several nodes: also count the bytes this network interface sent per allreduce (eth0)");
  app.add_option("--algorithms", names,
                 "which algorithms, in column order: ddl's, textbook, or on a GPU per rank gpu-ring, gpu-rhd, "
                 "gpu-tree, gpu-naive and nccl")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  const Communicator world = Communicator::world();
  // Made once, collectively, if any column runs on the GPU.
  std::optional<NcclCommunicator> nccl;
  try {
    if (std::any_of(names.begin(), names.end(), on_gpu)) nccl = NcclCommunicator::create(world);
  } catch (const Error& error) {  // no GPU, no NCCL in this build, ranks sharing a GPU: said plainly
    std::fprintf(stderr, "ddl_bench_allreduce: rank %d: %s\n", world.rank(), error.what());
    return 1;
  }
  const Device gpu = nccl ? cuda(nccl->device()) : cpu();
  std::vector<Column> columns;
  for (const auto& name : names) {
    if (name == "textbook") {
      columns.push_back({name, textbook_ring, {}});
    } else if (on_gpu(name)) {
      const AllreduceAlgorithm algorithm =
          name == "nccl" ? AllreduceAlgorithm::builtin : parse_allreduce(name.substr(std::string("gpu-").size()));
      columns.push_back({name, {}, [&nccl, algorithm](const Tensor& data) { allreduce(*nccl, data, algorithm); }});
    } else {
      const AllreduceAlgorithm algorithm = parse_allreduce(name);
      columns.push_back(
          {name, [&world, algorithm](std::vector<float>& data) { allreduce(world, data, algorithm); }, {}});
    }
  }
  std::optional<InterfaceCounter> counter;
  try {
    if (!interface.empty()) counter.emplace(world, interface);
  } catch (const Error& error) {  // on the rank that cannot read it: end them all, not only this one
    world.abort(error.what());
  }
  const int n = world.size();
  const double bus_factor = 2.0 * (n - 1) / n;
  if (world.rank() == 0) {
    std::printf("# ddl allreduce, %d ranks, float32 sum; time in us, algbw and busbw in GB/s\n", n);
    std::string header = fmt::format("{:>12} {:>12}", "size(B)", "count");
    for (const auto& name : names) {
      header += fmt::format(" | {:>8} {:>9} {:>7} {:>7} {:>5}", name, "time", "algbw", "busbw", "wrong");
      if (counter) header += fmt::format(" {:>12}", "sent(B)");
    }
    std::printf("%s\n", header.c_str());
  }
  const double round_trip_before = cache_line_round_trip_ns();
  for (std::int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const std::int64_t count = bytes / 4;
    std::string line = fmt::format("{:>12} {:>12}", bytes, count);
    for (const Result& result :
         measure(world, columns, count, budget, min_iterations, gpu, counter ? &*counter : nullptr)) {
      const double algbw = static_cast<double>(bytes) / (result.microseconds * 1e-6) * 1e-9;
      line += fmt::format(" | {:>8} {:>9.1f} {:>7.3f} {:>7.3f} {:>5}", "", result.microseconds, algbw,
                          algbw * bus_factor, result.wrong);
      if (counter) line += fmt::format(" {:>12.0f}", result.interface_bytes);
    }
    if (world.rank() == 0) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  const double round_trip_after = cache_line_round_trip_ns();
  if (world.rank() == 0) {
    std::printf(
        "# cache-line round trip between ranks 0 and 1: %.0f ns before, %.0f ns after "
        "(~50 ns: their cores share a cache; several hundred: they do not, and shm slows down)\n",
        round_trip_before, round_trip_after);
  }
  return 0;
}
