// Fashion-MNIST / MNIST loading: find the split's two IDX files, read them,
// check they agree, and convert to the tensors a classifier trains on.
#include <ddl/models/data/fashion_mnist.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include <ddl/core/check.hpp>
#include <ddl/models/data/idx.hpp>

namespace ddl::models {
namespace {

// The first existing file among the spellings used by the MNIST and
// Fashion-MNIST distributions, or an error listing every one tried.
std::string find_split_file(const std::string& dir, const std::string& prefix, const std::string& kind,
                            const std::string& idx) {
  const std::vector<std::string> names = {
      prefix + "-" + kind + "-" + idx + "-ubyte.gz", prefix + "-" + kind + "-" + idx + "-ubyte",
      prefix + "-" + kind + "." + idx + "-ubyte.gz", prefix + "-" + kind + "." + idx + "-ubyte"};
  std::string tried;
  for (const std::string& name : names) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) return path.string();
    tried += (tried.empty() ? "" : ", ") + name;
  }
  detail::fail("load_fashion_mnist: no {} file in {} (looked for {})", kind, dir, tried);
}

}  // namespace

Dataset load_idx_classification(const std::string& images_path, const std::string& labels_path, std::int64_t limit) {
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  DDL_CHECK(images.dims.size() == 3, "load_idx_classification: {}: images must have 3 dims [N, H, W], got {}",
            images_path, Shape(images.dims));
  DDL_CHECK(labels.dims.size() == 1, "load_idx_classification: {}: labels must have 1 dim [N], got {}", labels_path,
            Shape(labels.dims));
  DDL_CHECK(images.dims[0] == labels.dims[0], "load_idx_classification: {} holds {} images but {} holds {} labels",
            images_path, images.dims[0], labels_path, labels.dims[0]);
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    DDL_CHECK(labels.data[i] <= 9, "load_idx_classification: {}: label {} of sample {} is not a class 0..9",
              labels_path, labels.data[i], i);
  }
  if (limit >= 0 && limit < images.dims[0]) {
    const std::int64_t pixels = images.dims[1] * images.dims[2];
    images.dims[0] = labels.dims[0] = limit;
    images.data.resize(static_cast<std::size_t>(limit * pixels));
    labels.data.resize(static_cast<std::size_t>(limit));
  }
  const std::vector<std::int64_t> dims = images.dims;
  images.dims = {dims[0], 1, dims[1], dims[2]};  // NCHW with one channel
  return Dataset{idx_to_float(images, 1.0f / 255.0f), idx_to_int64(labels)};
}

Dataset load_fashion_mnist(const std::string& dir, bool train, std::int64_t limit) {
  std::error_code error;
  DDL_CHECK(std::filesystem::is_directory(dir, error), "load_fashion_mnist: {} is not a directory", dir);
  const std::string prefix = train ? "train" : "t10k";
  const std::string images = find_split_file(dir, prefix, "images", "idx3");
  const std::string labels = find_split_file(dir, prefix, "labels", "idx1");
  return load_idx_classification(images, labels, limit);
}

}  // namespace ddl::models
