// The PNG writer (models/data/png.cpp): files decoded here with zlib alone
// (signature, IHDR, every chunk's CRC, the rows) give back the pixels
// written; failures name the file and leave no partial or temp file; the
// conversions from float images and class maps to pixels.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>
#include <ddl/models/data/png.hpp>

#include "support/temp_dir.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::models;
using ddl::test::throws_error_mentioning;

namespace {

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t big_endian(const std::vector<std::uint8_t>& bytes, std::size_t at) {
  return std::uint32_t{bytes[at]} << 24 | std::uint32_t{bytes[at + 1]} << 16 | std::uint32_t{bytes[at + 2]} << 8 |
         bytes[at + 3];
}

// A PNG decoder for what write_png writes (8 bits, no interlace, filter
// type 0 on every row), checking everything on the way.
Image decode_png(const std::vector<std::uint8_t>& file) {
  const std::vector<std::uint8_t> signature{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  REQUIRE(file.size() >= 8);
  CHECK(std::vector<std::uint8_t>(file.begin(), file.begin() + 8) == signature);
  std::vector<std::string> types;
  std::vector<std::uint8_t> header, compressed;
  for (std::size_t at = 8; at < file.size();) {
    REQUIRE(at + 12 <= file.size());
    const std::uint32_t length = big_endian(file, at);
    REQUIRE(at + 12 + length <= file.size());
    const std::string type(file.begin() + static_cast<std::ptrdiff_t>(at + 4),
                           file.begin() + static_cast<std::ptrdiff_t>(at + 8));
    types.push_back(type);
    const std::uint8_t* data = file.data() + at + 8;
    CHECK(big_endian(file, at + 8 + length) == crc32(crc32(0L, Z_NULL, 0), file.data() + at + 4, length + 4));
    if (type == "IHDR") header.assign(data, data + length);
    if (type == "IDAT") compressed.insert(compressed.end(), data, data + length);
    at += 12 + length;
  }
  CHECK(types == std::vector<std::string>{"IHDR", "IDAT", "IEND"});
  REQUIRE(header.size() == 13);
  Image image{big_endian(header, 4), big_endian(header, 0), header[9] == 0 ? 1 : 3, {}};  // IHDR: width, height
  // Bit depth 8, gray or RGB, deflate, adaptive filters, no interlace.
  CHECK(header[8] == 8);
  CHECK((header[9] == 0 || header[9] == 2));
  CHECK((header[10] == 0 && header[11] == 0 && header[12] == 0));
  const auto row_bytes = static_cast<std::size_t>(image.width * image.channels);
  std::vector<std::uint8_t> rows((row_bytes + 1) * static_cast<std::size_t>(image.height));
  uLongf size = rows.size();
  REQUIRE(uncompress(rows.data(), &size, compressed.data(), compressed.size()) == Z_OK);
  REQUIRE(size == rows.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(image.height); ++r) {
    CHECK(rows[r * (row_bytes + 1)] == 0);
    const auto first = rows.begin() + static_cast<std::ptrdiff_t>(r * (row_bytes + 1) + 1);
    image.pixels.insert(image.pixels.end(), first, first + static_cast<std::ptrdiff_t>(row_bytes));
  }
  return image;
}

Image random_image(std::int64_t height, std::int64_t width, int channels, std::mt19937& rng) {
  Image image{height, width, channels, {}};
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::int64_t i = 0; i < height * width * channels; ++i)
    image.pixels.push_back(static_cast<std::uint8_t>(byte(rng)));
  return image;
}

}  // namespace

TEST_CASE("write_png: gray and RGB images of awkward sizes decode to the pixels written") {
  test::TempDir dir("png");
  std::mt19937 rng(3);
  for (const int channels : {1, 3}) {
    for (const auto& size : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 13}, {3, 301}, {64, 2}}) {
      const std::int64_t height = size.first, width = size.second;
      CAPTURE(channels);
      CAPTURE(height);
      CAPTURE(width);
      const Image image = random_image(height, width, channels, rng);
      write_png(dir.file("image.png"), image);
      const Image decoded = decode_png(read_bytes(dir.file("image.png")));
      CHECK(decoded.height == height);
      CHECK(decoded.width == width);
      CHECK(decoded.channels == channels);
      CHECK(decoded.pixels == image.pixels);
    }
  }
  CHECK(dir.entries() == std::vector<std::string>{"image.png"});  // no temp file left
}

TEST_CASE("write_png: an image of the wrong shape is an error naming the file, and nothing is written") {
  test::TempDir dir("png");
  const std::string path = dir.file("bad.png");
  CHECK(throws_error_mentioning(
      [&] {
        write_png(path, Image{2, 2, 2, std::vector<std::uint8_t>(8)});
      },
      {"write_png", path, "2"}));
  CHECK(throws_error_mentioning([&] { write_png(path, Image{0, 5, 1, {}}); }, {"write_png", path, "0 x 5"}));
  CHECK(throws_error_mentioning(
      [&] {
        write_png(path, Image{2, 3, 3, std::vector<std::uint8_t>(17)});
      },
      {"write_png", path, "18 bytes", "17"}));
  CHECK(dir.entries().empty());
}

TEST_CASE("write_png: a missing directory, or a file where the directory should be, is an error naming the file") {
  test::TempDir dir("png");
  const Image image{1, 1, 1, {7}};
  const std::string missing = dir.file("no/such/dir/image.png");
  CHECK(throws_error_mentioning([&] { write_png(missing, image); }, {"write_png", missing, "No such file"}));
  std::ofstream(dir.file("plain")) << "x";
  const std::string under_file = dir.file("plain/image.png");
  CHECK(throws_error_mentioning([&] { write_png(under_file, image); }, {"write_png", under_file, "Not a directory"}));
}

TEST_CASE("write_png: a write that fails midway leaves the old file whole and no temp file") {
  // A file size limit stands in for a full disk: the write fails with EFBIG
  // (root ignores permissions, but not this). SIGXFSZ would end the process.
  test::TempDir dir("png");
  std::mt19937 rng(5);
  const std::string path = dir.file("image.png");
  const Image small = random_image(2, 3, 1, rng);
  write_png(path, small);
  const auto before = read_bytes(path);
  rlimit old_limit{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  const auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit limit = old_limit;
  limit.rlim_cur = 4096;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  // Random bytes do not compress: about 30 kB of PNG.
  const auto refused = throws_error_mentioning([&] { write_png(path, random_image(100, 100, 3, rng)); },
                                               {"write_png", path, "File too large"});
  setrlimit(RLIMIT_FSIZE, &old_limit);
  signal(SIGXFSZ, old_handler);
  CHECK(refused);
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"image.png"});
}

TEST_CASE("grayscale_image maps low..high (or the image's own range) to 0..255, clamping outside") {
  const Tensor values = from_vector({-1.0f, 0.0f, 0.5f, 1.0f, 3.0f, 0.25f}, {2, 3});
  const Image fixed = grayscale_image(values, 0.0f, 1.0f);
  CHECK(fixed.height == 2);
  CHECK(fixed.width == 3);
  CHECK(fixed.channels == 1);
  CHECK(fixed.pixels == std::vector<std::uint8_t>{0, 0, 128, 255, 255, 64});  // 127.5 and 63.75 rounded
  // Own range -1..3: (v + 1) / 4 · 255.
  CHECK(grayscale_image(values).pixels == std::vector<std::uint8_t>{0, 64, 96, 128, 255, 80});
  CHECK(grayscale_image(full({2, 2}, 4.0)).pixels == std::vector<std::uint8_t>(4, 0));
}

TEST_CASE("grayscale_image refuses another shape, a non-finite value or an empty range") {
  CHECK(throws_error_mentioning([] { grayscale_image(zeros({1, 2, 2})); }, {"grayscale_image", "[1, 2, 2]"}));
  CHECK(throws_error_mentioning(
      [] {
        grayscale_image(from_vector({0.0f, NAN, 1.0f, 2.0f}, {2, 2}));
      },
      {"grayscale_image", "nan", "(0, 1)"}));
  CHECK(throws_error_mentioning(
      [] {
        grayscale_image(zeros({2, 2}), 1.0f, 1.0f);
      },
      {"grayscale_image", "low 1", "high 1"}));
}

TEST_CASE("class_image colours each class from the palette, int32 and int64 alike, and refuses unknown labels") {
  const std::vector<std::int64_t> labels{0, 1, 2, 3, 7, 0};
  for (const Tensor& classes :
       {from_vector(labels, {3, 2}), from_vector(std::vector<std::int32_t>(labels.begin(), labels.end()), {3, 2})}) {
    const Image image = class_image(classes);
    CHECK(image.channels == 3);
    CHECK(image.height == 3);
    REQUIRE(image.pixels.size() == 18);
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const auto& colour = kClassPalette[static_cast<std::size_t>(labels[i])];
      CHECK(std::vector<std::uint8_t>(image.pixels.begin() + 3 * i, image.pixels.begin() + 3 * i + 3) ==
            std::vector<std::uint8_t>(colour.begin(), colour.end()));
    }
  }
  CHECK(throws_error_mentioning(
      [] {
        class_image(from_vector(std::vector<std::int64_t>{0, 1, 8, 0}, {2, 2}));
      },
      {"class_image", "label 8", "(1, 0)"}));
  CHECK(throws_error_mentioning([] { class_image(zeros({2, 2})); }, {"class_image", "float32"}));
}
