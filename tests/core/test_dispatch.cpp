// backend::dispatch (core/dispatch.hpp): the one switch between an op's CPU
// and CUDA implementations, and its error for a CUDA tensor in a build
// without CUDA.
#include <doctest/doctest.h>

#include <ddl/build_config.hpp>
#include <ddl/core/dispatch.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

TEST_CASE("backend::dispatch: a CPU device runs the CPU implementation only") {
  bool ran_cpu = false, ran_cuda = false;
  backend::dispatch(
      "test_op", cpu(1), [&] { ran_cpu = true; }, [&](auto) { ran_cuda = true; });
  CHECK(ran_cpu);
  CHECK_FALSE(ran_cuda);
}

TEST_CASE("backend::dispatch: a CUDA device in a build without CUDA is an error naming the op and the device") {
  if constexpr (build::kWithCuda) {
    MESSAGE("skipped: this build has CUDA");
  } else {
    CHECK(throws_error_mentioning(
        [] {
          backend::dispatch(
              "test_op", cuda(0), [] {}, [](auto) {});
        },
        {"test_op", "cuda:0", "no CUDA support"}));
  }
}
