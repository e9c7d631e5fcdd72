// Input normalisation (models/data/normalization.cpp and the DataLoader's gather):
// (x - mean) / stddev against a hand computation, and feature statistics
// against a direct double-precision computation.
#include <doctest/doctest.h>

#include <cmath>

#include <ddl/ddl.hpp>
#include <ddl/models/data/data_loader.hpp>

#include "models/data/loader_test_data.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::models;
using ddl::test::all_close;
using ddl::test::indices_of;
using ddl::test::read_epoch;

TEST_CASE("DataLoader: normalisation gives (x - mean) / stddev per last-dim feature") {
  const ddl::models::Dataset data = ddl::test::indexed_dataset(13, {4, 3});
  const std::vector<float> mean{0.25f, -0.5f, 1.0f}, stddev{0.5f, 2.0f, 3.0f};
  DataLoader loader(data, {.batch_size = 5,
                           .shuffle = true,
                           .normalization = Normalization{from_vector(mean, {1, 3}), from_vector(stddev, {3})}});
  const std::vector<float> rows = data.inputs.to_vector<float>();
  for (const optim::Batch& batch : read_epoch(loader)) {
    const std::vector<std::int64_t> samples = indices_of(batch);
    std::vector<float> expected;
    for (const std::int64_t sample : samples) {
      for (std::size_t e = 0; e < 12; ++e) {
        const float x = rows[static_cast<std::size_t>(sample) * 12 + e];
        expected.push_back((x - mean[e % 3]) / stddev[e % 3]);
      }
    }
    CHECK(all_close(batch.inputs, expected, 1e-6, 1e-6));
  }
}

TEST_CASE("DataLoader: normalisation with one value per channel of images") {
  const ddl::models::Dataset data = ddl::test::indexed_dataset(6, {2, 3, 3});
  DataLoader loader(data, {.batch_size = 6,
                           .normalization = Normalization{from_vector({1.0f, -1.0f}, {2, 1, 1}),
                                                          from_vector({4.0f, 0.5f}, {2, 1, 1})}});
  const std::vector<float> rows = data.inputs.to_vector<float>();
  std::vector<float> expected(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const bool second_channel = (i % 18) >= 9;
    expected[i] = second_channel ? (rows[i] + 1.0f) / 0.5f : (rows[i] - 1.0f) / 4.0f;
  }
  CHECK(all_close(read_epoch(loader).at(0).inputs, expected, 1e-6, 1e-6));
}

TEST_CASE("feature_normalization: matches a direct double-precision mean and population stddev") {
  Generator generator(17);
  const Tensor inputs = ddl::test::uniform_tensor({37, 5, 3}, generator, -2.0f, 3.0f);
  const std::vector<float> x = inputs.to_vector<float>();
  const auto at = [&](int n, int i, int j) {
    return static_cast<double>(x[static_cast<std::size_t>((n * 5 + i) * 3 + j)]);
  };

  // dim 2: one statistic per last-dim feature j, over samples and dim 1.
  const Normalization per_feature = feature_normalization(inputs, 2);
  CHECK(per_feature.mean.shape() == Shape{1, 3});
  CHECK(per_feature.stddev.shape() == Shape{1, 3});
  std::vector<float> means, stddevs;
  for (int j = 0; j < 3; ++j) {
    double sum = 0, squares = 0;
    for (int n = 0; n < 37; ++n)
      for (int i = 0; i < 5; ++i) sum += at(n, i, j);
    const double mean = sum / (37 * 5);
    for (int n = 0; n < 37; ++n)
      for (int i = 0; i < 5; ++i) squares += (at(n, i, j) - mean) * (at(n, i, j) - mean);
    means.push_back(static_cast<float>(mean));
    stddevs.push_back(static_cast<float>(std::sqrt(squares / (37 * 5))));
  }
  CHECK(all_close(per_feature.mean, means, 1e-6, 1e-6));
  CHECK(all_close(per_feature.stddev, stddevs, 1e-6, 1e-6));

  // dim 1 (also as -2): one statistic per index i, over samples and dim 2.
  const Normalization per_row = feature_normalization(inputs, -2);
  CHECK(per_row.mean.shape() == Shape{5, 1});
  means.clear();
  for (int i = 0; i < 5; ++i) {
    double sum = 0;
    for (int n = 0; n < 37; ++n)
      for (int j = 0; j < 3; ++j) sum += at(n, i, j);
    means.push_back(static_cast<float>(sum / (37 * 3)));
  }
  CHECK(all_close(per_row.mean, means, 1e-6, 1e-6));
}

TEST_CASE("feature_normalization: one grey channel of images gives [1, 1, 1] statistics") {
  Generator generator(2);
  const Tensor images = ddl::test::uniform_tensor({7, 1, 4, 4}, generator, 0.0f, 1.0f);
  const Normalization grey = feature_normalization(images, 1);
  CHECK(grey.mean.shape() == Shape{1, 1, 1});
  const std::vector<float> x = images.to_vector<float>();
  double sum = 0;
  for (const float value : x) sum += value;
  CHECK(grey.mean.to_vector<float>()[0] == doctest::Approx(sum / static_cast<double>(x.size())).epsilon(1e-6));
  // Normalised by its own statistics, the data set has mean 0 and std 1.
  DataLoader loader({images, arange(7, TensorOptions{}.with_dtype(DType::Int64))},
                    {.batch_size = 7, .normalization = grey});
  const Tensor normalised = read_epoch(loader).at(0).inputs;
  CHECK(mean(normalised).item() == doctest::Approx(0.0).epsilon(1e-5));
  CHECK(mean(normalised * normalised).item() == doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("feature_normalization: a constant feature gets stddev 1") {
  const Tensor inputs = from_vector({1.0f, 5.0f, 1.0f, 7.0f, 1.0f, 9.0f}, {3, 2});
  const Normalization statistics = feature_normalization(inputs, 1);
  CHECK(statistics.mean.to_vector<float>() == std::vector<float>{1.0f, 7.0f});
  CHECK(all_close(statistics.stddev, {1.0f, std::sqrt(8.0f / 3.0f)}));
}

TEST_CASE("feature_normalization: the sample dim is an error naming the shape") {
  CHECK(ddl::test::throws_error_mentioning(
      [] {
        feature_normalization(zeros({4, 3}), 0);
      },
      {"feature_normalization", "sample dim", "[4, 3]"}));
}
