// IDX files (models/data/idx.cpp): raw and gzip'd round trips, and every kind of
// corrupt file ends in a ddl::Error that names the file.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/models/data/fashion_mnist.hpp>
#include <ddl/models/data/idx.hpp>

#include "support/temp_dir.hpp"

using namespace ddl;
using namespace ddl::models;

using ddl::test::TempDir;

namespace {

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A valid raw IDX file of unsigned bytes: 2 x 3 values 0..5.
std::vector<std::uint8_t> small_idx_bytes() { return {0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 2, 3, 4, 5}; }

// Checks that reading `path` throws a ddl::Error whose message names the
// file and contains `problem`.
void check_read_fails(const std::string& path, const std::string& problem) {
  try {
    read_idx(path);
    FAIL("read_idx accepted " << path);
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK_MESSAGE(message.find(path) != std::string::npos, message);
    CHECK_MESSAGE(message.find(problem) != std::string::npos, message);
  }
}

IdxArray counting_array(std::vector<std::int64_t> dims) {
  IdxArray array{std::move(dims), {}};
  array.data.resize(static_cast<std::size_t>(array.numel()));
  for (std::size_t i = 0; i < array.data.size(); ++i) array.data[i] = static_cast<std::uint8_t>(i * 7 % 256);
  return array;
}

}  // namespace

TEST_CASE("read_idx reads a raw IDX file's dims and bytes") {
  TempDir dir("idx");
  write_bytes(dir.file("small"), small_idx_bytes());
  const IdxArray array = read_idx(dir.file("small"));
  CHECK(array.dims == std::vector<std::int64_t>{2, 3});
  CHECK(array.data == std::vector<std::uint8_t>{0, 1, 2, 3, 4, 5});
}

TEST_CASE("write_idx then read_idx round-trips raw and gzip files") {
  TempDir dir("idx");
  const IdxArray original = counting_array({5, 4, 3});
  for (const bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "a.gz" : "a");
    write_idx(path, original, gzip);
    const IdxArray back = read_idx(path);
    CHECK(back.dims == original.dims);
    CHECK(back.data == original.data);
  }
  // The gzip file really is compressed (gzip's magic 1f 8b), the raw one is not.
  std::ifstream gz(dir.file("a.gz"), std::ios::binary);
  CHECK(gz.get() == 0x1f);
  CHECK(gz.get() == 0x8b);
  CHECK(std::filesystem::file_size(dir.file("a")) == 4 + 3 * 4 + 60);
}

TEST_CASE("idx_to_float scales and idx_to_int64 keeps the values, both with the file's shape") {
  const IdxArray array{{2, 2}, {0, 51, 255, 7}};
  const Tensor pixels = idx_to_float(array, 1.0f / 255.0f);
  CHECK(pixels.shape() == Shape{2, 2});
  CHECK(pixels.dtype() == DType::Float32);
  const auto values = pixels.to_vector<float>();
  CHECK(values[0] == 0.0f);
  CHECK(values[1] == doctest::Approx(0.2f));
  CHECK(values[2] == doctest::Approx(1.0f));
  const Tensor labels = idx_to_int64(array);
  CHECK(labels.dtype() == DType::Int64);
  CHECK(labels.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 51, 255, 7});
}

TEST_CASE("read_idx names a missing file") {
  TempDir dir("idx");
  check_read_fails(dir.file("absent-idx1-ubyte"), "no such file");
}

TEST_CASE("read_idx rejects a bad magic number") {
  TempDir dir("idx");
  auto bytes = small_idx_bytes();
  bytes[0] = 0x12;
  write_bytes(dir.file("bad_magic"), bytes);
  check_read_fails(dir.file("bad_magic"), "bad magic");
}

TEST_CASE("read_idx rejects a type code other than unsigned byte") {
  TempDir dir("idx");
  auto bytes = small_idx_bytes();
  bytes[2] = 0x0D;  // float32
  write_bytes(dir.file("floats"), bytes);
  check_read_fails(dir.file("floats"), "unsupported type code 0x0D");
}

TEST_CASE("read_idx rejects zero dims and more dims than a Shape holds") {
  TempDir dir("idx");
  write_bytes(dir.file("rank0"), {0, 0, 0x08, 0, 1, 2});
  check_read_fails(dir.file("rank0"), "0 dimensions");
  write_bytes(dir.file("rank7"), {0, 0, 0x08, 7});
  check_read_fails(dir.file("rank7"), "7 dimensions");
}

TEST_CASE("read_idx rejects truncated raw and gzip files") {
  TempDir dir("idx");
  auto bytes = small_idx_bytes();
  bytes.pop_back();
  write_bytes(dir.file("short"), bytes);
  check_read_fails(dir.file("short"), "truncated");
  write_bytes(dir.file("short_header"), {0, 0, 0x08, 3, 0, 0, 0, 2});
  check_read_fails(dir.file("short_header"), "truncated");
  write_bytes(dir.file("tiny"), {0, 0});
  check_read_fails(dir.file("tiny"), "truncated");

  // A gzip stream cut in half: zlib reports the unexpected end, or the
  // values run out; either way the error names the file.
  write_idx(dir.file("cut.gz"), counting_array({64, 64}), true);
  std::filesystem::resize_file(dir.file("cut.gz"), std::filesystem::file_size(dir.file("cut.gz")) / 2);
  CHECK_THROWS_WITH_AS(read_idx(dir.file("cut.gz")), doctest::Contains(dir.file("cut.gz").c_str()), Error);
}

TEST_CASE("read_idx rejects bytes after the promised values") {
  TempDir dir("idx");
  auto bytes = small_idx_bytes();
  bytes.push_back(99);
  write_bytes(dir.file("long"), bytes);
  check_read_fails(dir.file("long"), "trailing data");
}

TEST_CASE("load_idx_classification rejects images and labels of different counts") {
  TempDir dir("idx");
  write_idx(dir.file("images"), counting_array({3, 4, 4}));
  write_idx(dir.file("labels"), IdxArray{{2}, {1, 2}});
  CHECK_THROWS_WITH_AS(load_idx_classification(dir.file("images"), dir.file("labels")),
                       doctest::Contains(("3 images but " + dir.file("labels") + " holds 2 labels").c_str()), Error);
}

TEST_CASE("load_idx_classification rejects labels outside 0..9") {
  TempDir dir("idx");
  write_idx(dir.file("images"), counting_array({2, 4, 4}));
  write_idx(dir.file("labels"), IdxArray{{2}, {1, 10}});
  CHECK_THROWS_WITH_AS(load_idx_classification(dir.file("images"), dir.file("labels")),
                       doctest::Contains(dir.file("labels").c_str()), Error);
}

// Found by fuzz/idx.cpp: the product of the extents overflowed int64 (UB)
// before it was compared with the 2^40 cap.
TEST_CASE("read_idx rejects dims whose product is past 2^40, even beside a zero extent") {
  TempDir dir("idx");
  const std::uint8_t max = 0xFF;
  write_bytes(dir.file("huge"), {0, 0, 0x08, 3, max, max, max, max, max, max, max, max, max, max, max, max});
  check_read_fails(dir.file("huge"), "implausible dims [4294967295, 4294967295, 4294967295]");
  // Empty, but Shape::numel would overflow on the way to the zero.
  write_bytes(dir.file("huge_empty"), {0, 0, 0x08, 3, max, max, max, max, max, max, max, max, 0, 0, 0, 0});
  check_read_fails(dir.file("huge_empty"), "more than 2^40 values");
}
