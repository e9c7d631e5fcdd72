// The main of the MPI test programs: every rank runs every test case (they
// are collective), and the program fails on every rank if any rank failed,
// so mpiexec's exit code and ctest see one verdict. Built with
// DDL_MPI_TESTS_NEED_GPU, it exits 77 (ctest: skipped) on every rank unless
// every rank has a GPU of its own.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <array>
#include <cstdio>

#include <ddl/core/device.hpp>
#include <ddl/parallel/communication/communicator.hpp>

int main(int argc, char** argv) {
  const ddl::parallel::Communicator world = ddl::parallel::Communicator::world();
#ifdef DDL_MPI_TESTS_NEED_GPU
  // NCCL wants one GPU per rank on a node; where a node has fewer, every
  // rank skips alike (a rank that ran on would wait for the others).
  const int gpus = ddl::device_count(ddl::DeviceType::CUDA);
  std::array<double, 1> short_of_gpus{gpus < world.local_size() ? 1.0 : 0.0};
  world.sum_doubles(short_of_gpus);
  if (short_of_gpus[0] > 0) {
    if (world.rank() == 0) {
      std::printf("SKIPPED: needs one GPU per rank on a node; rank 0's node has %d GPU(s) for %d rank(s)\n", gpus,
                  world.local_size());
    }
    return 77;
  }
#endif
  doctest::Context context(argc, argv);
  std::printf("%s\n", world.describe().c_str());
  const int result = context.run();
  std::array<double, 1> failures{result == 0 ? 0.0 : 1.0};
  world.sum_doubles(failures);
  if (world.rank() == 0 && failures[0] > 0) std::printf("%g rank(s) failed\n", failures[0]);
  return failures[0] > 0 ? 1 : 0;
}
