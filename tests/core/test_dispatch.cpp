// backend::dispatch (core/dispatch.hpp): the one switch between an op's CPU
// and CUDA implementations, and its error for a CUDA tensor in a build
// without CUDA.
#include <doctest/doctest.h>

#include <ddl/build_config.hpp>
#include <ddl/core/dispatch.hpp>
#include <ddl/core/entry_points.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

// cpu:0, not a logical device: the conformance suite checks that cpu:1 ran
// only ddl's own entry points.
TEST_CASE("backend::dispatch: a CPU device runs the CPU implementation only") {
  bool ran_cpu = false, ran_cuda = false;
  backend::dispatch(
      "test_op", cpu(0), [&] { ran_cpu = true; }, [&](auto) { ran_cuda = true; });
  CHECK(ran_cpu);
  CHECK_FALSE(ran_cuda);
}

namespace {

bool noted(const char* op, const Device& device) {
  const std::vector<std::string> run = backend::entry_points_run(device);
  return std::find(run.begin(), run.end(), op) != run.end();
}

// One call site running whichever op it is given.
void run_at_one_site(const char* op, const Device& device) {
  backend::dispatch(
      op, device, [] {}, [](auto) {});
}

}  // namespace

TEST_CASE("backend::dispatch: a call site notes each op and device it runs, three ops at one site included") {
  const char* ops[] = {"test_site first", "test_site second", "test_site third"};
  for (int round = 0; round < 3; ++round) {  // later rounds take the noted-already path
    for (const char* op : ops) {
      run_at_one_site(op, cpu(0));
      CHECK(noted(op, cpu(0)));
    }
  }
  const std::vector<std::string> run = backend::entry_points_run(cpu(0));
  CHECK(std::count(run.begin(), run.end(), "test_site first") == 1);
  CHECK(std::is_sorted(run.begin(), run.end()));
  // Another device is its own entry, and a device past the 32 a site
  // remembers is still noted.
  CHECK_FALSE(noted("test_site second", cpu(40)));
  run_at_one_site("test_site second", cpu(40));
  CHECK(noted("test_site second", cpu(40)));
  CHECK_FALSE(noted("test_site first", cpu(40)));
}

TEST_CASE("backend::dispatch: a call that throws is not noted as run") {
  CHECK_THROWS(backend::dispatch(
      "test_throws", cpu(0), [] { throw std::runtime_error("fails"); }, [](auto) {}));
  CHECK_FALSE(noted("test_throws", cpu(0)));
}

TEST_CASE("backend::dispatch: a CUDA device in a build without CUDA is an error naming the op and the device") {
  if constexpr (build::kWithCuda) {
    test::skip("this build has CUDA");
  } else {
    CHECK(throws_error_mentioning(
        [] {
          backend::dispatch(
              "test_op", cuda(0), [] {}, [](auto) {});
        },
        {"test_op", "cuda:0", "no CUDA support"}));
  }
}
