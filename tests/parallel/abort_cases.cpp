// Programs that must end the whole job with a clear message instead of
// hanging; ctest runs them under mpiexec and matches the message.
//   mismatch: rank 1 builds a wider layer than the others; DataParallel's
//     layout check names the tensor and what each rank has.
//   stall: rank 1 never reaches its first step; rank 0's stall inspector
//     names it after DDL_STALL_TIMEOUT seconds.
//   collective-stall (3 ranks): rank 2 never joins a sum; ranks 0 and 1,
//     stalled in it, probe who is there and name rank 2 and its host.
//   sums: every rank sums a few values every 50 ms for two minutes, and
//     says so after the first; the multi-node tests cut a node's link
//     under it.
//   nccl-stall: rank 1 never joins an NCCL allreduce; rank 0's wait aborts
//     the NCCL communicator and the job after DDL_STALL_TIMEOUT seconds.
//     Needs a GPU per rank; prints "SKIPPED: ..." and exits 77 otherwise.
#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <ddl/ddl.hpp>
#include <ddl/parallel/strategies/data_parallel.hpp>
#include <ddl/parallel/communication/nccl_communicator.hpp>

using namespace ddl;

namespace {

int nccl_stall(const parallel::Communicator& world) {
  // Every rank skips alike, so none waits in a collective the others left.
  std::array<double, 1> short_of_gpus{device_count(DeviceType::CUDA) < world.local_size() ? 1.0 : 0.0};
  world.sum_doubles(short_of_gpus);
  if (!parallel::NcclCommunicator::built() || short_of_gpus[0] > 0) {
    if (world.rank() == 0) std::printf("SKIPPED: needs NCCL and a GPU per rank\n");
    return 77;
  }
  const parallel::NcclCommunicator nccl = parallel::NcclCommunicator::create(world);
  if (world.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::minutes(5));
    return 0;
  }
  nccl.allreduce(ones({1000}, {DType::Float32, cuda(nccl.device()), false}));
  std::printf("rank %d: the allreduce ended without rank 1\n", world.rank());
  return 0;
}

int collective_stall(const parallel::Communicator& world) {
  if (world.rank() == 2) {
    std::this_thread::sleep_for(std::chrono::minutes(5));
    return 0;
  }
  std::array<double, 3> metrics{1.0, 2.0, 3.0};
  world.sum_doubles(metrics);
  std::printf("rank %d: the sum ended without rank 2\n", world.rank());
  return 0;
}

int sums(const parallel::Communicator& world) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (int round = 0; std::chrono::steady_clock::now() < end; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::array<double, 3> metrics{1.0, 2.0, 3.0};
    world.sum_doubles(metrics);
    if (round == 0) {
      std::printf("rank %d: summing\n", world.rank());  // the test cuts a link once every rank has said so
      std::fflush(stdout);
    }
  }
  std::printf("rank %d: summed for two minutes\n", world.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "";
  const parallel::Communicator world = parallel::Communicator::world();
  if (which == "nccl-stall") return nccl_stall(world);
  if (which == "collective-stall") return collective_stall(world);
  if (which == "sums") return sums(world);
  Generator generator(1);
  auto model = std::make_shared<layers::Sequential>();
  const std::int64_t hidden = which == "mismatch" && world.rank() == 1 ? 9 : 8;
  model->emplace<layers::Dense>(4, hidden, true, &generator).emplace<layers::ReLU>().emplace<layers::Dense>(
      hidden, 3, true, &generator);
  optim::TrainerOptions options;
  options.verbosity = optim::Verbosity::quiet;
  options.strategy = std::make_shared<parallel::DataParallel>(world);
  optim::Trainer trainer(model, layers::cross_entropy, std::make_shared<optim::SGD>(model->parameters()), options);
  models::DataLoader data({ones({16, 4}), zeros({16}, {DType::Int64})}, {.batch_size = 4});

  if (which == "stall" && world.rank() == 1) {
    // Joins prepare() (collective), then never trains.
    options.strategy->prepare(*model, &trainer.optimizer());
    std::this_thread::sleep_for(std::chrono::minutes(5));
    return 0;
  }
  trainer.fit(data, {.epochs = 1});
  std::printf("rank %d: trained without noticing (%s)\n", world.rank(), which.c_str());
  return 0;
}
