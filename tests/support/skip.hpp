// A case that cannot run on this machine (no GPU, one logical CPU device,
// no Fashion-MNIST) must not be counted as passed. It returns through
// skip(), which prints one line starting "SKIPPED: " with the reason;
// ctest's SKIP_REGULAR_EXPRESSION (tests/CMakeLists.txt) then reports the
// case as skipped, and its summary counts what did not run here:
//
//   if (!cuda_available()) return test::skip("no CUDA device");
//
// Cases that need a GPU are also in doctest's test suite "cuda"
// (TEST_CASE(name * doctest::test_suite("cuda"))), so a program that runs
// several cases as one ctest test keeps them apart (--test-suite-exclude).
#pragma once

#include <string_view>

namespace ddl::test {

void skip(std::string_view reason);

// Fashion-MNIST where the tests expect it: true; else the case is skipped,
// or fails where DDL_REQUIRE_TEST_DATA=1 (scripts/run-tests.sh, which
// installs the data, sets it, so a CI run without the data fails).
bool fashion_mnist_present(std::string_view directory);

}  // namespace ddl::test
