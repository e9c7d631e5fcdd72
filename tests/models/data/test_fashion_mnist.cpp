// Fashion-MNIST loading (models/data/fashion_mnist.cpp) on the installed data set,
// and the loader's errors on a directory that lacks the files.
#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <filesystem>
#include <string>

#include <ddl/ddl.hpp>
#include <ddl/models/data/fashion_mnist.hpp>

#include "support/skip.hpp"

using namespace ddl;
using namespace ddl::models;

TEST_CASE("the Fashion-MNIST test split has 10,000 images in 0..1 and 1,000 of each class") {
  if (!test::fashion_mnist_present(kFashionMnistDir)) return;
  const Dataset test = load_fashion_mnist(kFashionMnistDir, /*train=*/false);
  CHECK(test.size() == 10000);
  CHECK(test.inputs.shape() == Shape{10000, 1, 28, 28});
  CHECK(test.inputs.dtype() == DType::Float32);
  CHECK(test.targets.shape() == Shape{10000});
  CHECK(test.targets.dtype() == DType::Int64);

  const auto pixels = test.inputs.to_vector<float>();
  float low = 1.0f, high = 0.0f;
  for (const float p : pixels) {
    low = std::min(low, p);
    high = std::max(high, p);
  }
  CHECK(low == 0.0f);
  CHECK(high == 1.0f);

  std::array<int, 10> per_class{};
  for (const std::int64_t label : test.targets.to_vector<std::int64_t>()) {
    REQUIRE(label >= 0);
    REQUIRE(label <= 9);
    ++per_class[static_cast<std::size_t>(label)];
  }
  for (const int count : per_class) CHECK(count == 1000);
}

TEST_CASE("load_fashion_mnist keeps the first limit samples") {
  if (!test::fashion_mnist_present(kFashionMnistDir)) return;
  const Dataset all = load_fashion_mnist(kFashionMnistDir, false);
  const Dataset first = load_fashion_mnist(kFashionMnistDir, false, 100);
  CHECK(first.inputs.shape() == Shape{100, 1, 28, 28});
  CHECK(first.targets.shape() == Shape{100});
  const auto all_labels = all.targets.to_vector<std::int64_t>();
  const auto some_labels = first.targets.to_vector<std::int64_t>();
  CHECK(std::equal(some_labels.begin(), some_labels.end(), all_labels.begin()));
  CHECK(first.inputs.at({99, 0, 14, 14}) == all.inputs.at({99, 0, 14, 14}));
  CHECK(std::string(kFashionMnistClasses[9]) == "Ankle boot");
}

TEST_CASE("load_fashion_mnist lists the file names it looked for when they are missing") {
  const auto dir = std::filesystem::temp_directory_path() / ("ddl_test_fmnist_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CHECK_THROWS_WITH_AS(load_fashion_mnist(dir.string(), true),
                       doctest::Contains("train-images-idx3-ubyte.gz, train-images-idx3-ubyte"), Error);
  CHECK_THROWS_WITH_AS(load_fashion_mnist(dir.string(), false), doctest::Contains("t10k-images-idx3-ubyte.gz"), Error);
  std::filesystem::remove_all(dir);
  CHECK_THROWS_WITH_AS(load_fashion_mnist(dir.string()), doctest::Contains("is not a directory"), Error);
}
