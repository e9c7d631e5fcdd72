// Shared by the DataLoader tests: a data set whose targets hold each sample's
// own index, so a test can tell which samples a batch holds, and helpers to
// read a whole epoch.
#pragma once

#include <cstdint>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/models/data/data_loader.hpp>

#include "support/test_data.hpp"

namespace ddl::test {

// inputs: uniform random float32 [n, sample_dims...]; targets: int64 [n]
// holding 0..n-1.
inline models::Dataset indexed_dataset(std::int64_t n, const std::vector<std::int64_t>& sample_dims = {3},
                                       std::uint64_t seed = 7) {
  std::vector<std::int64_t> dims{n};
  dims.insert(dims.end(), sample_dims.begin(), sample_dims.end());
  Generator generator(seed);
  std::vector<std::int64_t> index(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) index[static_cast<std::size_t>(i)] = i;
  return {uniform_tensor(Shape(dims), generator), from_vector(index, Shape{n})};
}

// Every batch of `epoch` for `shard`, in order.
inline std::vector<optim::Batch> read_epoch(models::DataLoader& loader, std::int64_t epoch = 0,
                                            optim::Shard shard = {}) {
  loader.begin_epoch(epoch, shard);
  std::vector<optim::Batch> batches;
  while (auto batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

// The sample indices of a batch (targets from indexed_dataset).
inline std::vector<std::int64_t> indices_of(const optim::Batch& batch) {
  return batch.targets.to_vector<std::int64_t>();
}

// The sample indices of a whole epoch, in the order they came.
inline std::vector<std::int64_t> indices_of(const std::vector<optim::Batch>& batches) {
  std::vector<std::int64_t> all;
  for (const optim::Batch& batch : batches) {
    const std::vector<std::int64_t> some = indices_of(batch);
    all.insert(all.end(), some.begin(), some.end());
  }
  return all;
}

}  // namespace ddl::test
