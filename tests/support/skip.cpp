#include "support/skip.hpp"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include <doctest/doctest.h>

namespace ddl::test {

void skip(std::string_view reason) { std::cout << "SKIPPED: " << reason << std::endl; }

bool fashion_mnist_present(std::string_view directory) {
  const std::filesystem::path images = std::filesystem::path(directory) / "train-images-idx3-ubyte.gz";
  if (std::filesystem::exists(images)) return true;
  const char* required = std::getenv("DDL_REQUIRE_TEST_DATA");
  if (required != nullptr && std::string(required) == "1") {
    FAIL("no Fashion-MNIST in " << directory << ", and DDL_REQUIRE_TEST_DATA=1 says it must be there");
  } else {
    skip("no Fashion-MNIST in " + std::string(directory) + " (Debian package dataset-fashion-mnist)");
  }
  return false;
}

}  // namespace ddl::test
