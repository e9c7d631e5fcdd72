// The PNG writer (see png.hpp): the whole file is assembled in memory — the
// signature, then IHDR, one IDAT holding the zlib stream of the rows (each
// row led by filter type 0, "none"), and IEND, every chunk closed by the
// CRC-32 of its type and data — and then written in one go.
#include <ddl/models/data/png.hpp>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <ddl/core/atomic_file.hpp>
#include <ddl/core/check.hpp>

namespace ddl::models {
namespace {

constexpr std::array<std::uint8_t, 8> kSignature{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
constexpr std::int64_t kMaxSide = std::numeric_limits<std::int32_t>::max();  // PNG's limit on each side

void append_big_endian(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(value >> shift));
}

// Length, type, data, CRC-32 of type and data (PNG section 5.3).
void append_chunk(std::vector<std::uint8_t>& out, const char (&type)[5], const std::vector<std::uint8_t>& data) {
  append_big_endian(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  // zlib's crc32 takes at most 4 GiB per call; an IDAT holds less (its length is 32-bit).
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), out.data() + type_at, static_cast<uInt>(4 + data.size()));
  append_big_endian(out, static_cast<std::uint32_t>(crc));
}

std::vector<std::uint8_t> encode_png(const std::string& path, const Image& image) {
  const auto row_bytes = static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.channels);
  std::vector<std::uint8_t> rows;
  rows.reserve((row_bytes + 1) * static_cast<std::size_t>(image.height));
  for (std::int64_t y = 0; y < image.height; ++y) {
    rows.push_back(0);  // filter type: none
    const auto first = image.pixels.begin() + static_cast<std::ptrdiff_t>(row_bytes * static_cast<std::size_t>(y));
    rows.insert(rows.end(), first, first + static_cast<std::ptrdiff_t>(row_bytes));
  }
  uLongf compressed_size = compressBound(rows.size());
  std::vector<std::uint8_t> compressed(compressed_size);
  const int status = compress2(compressed.data(), &compressed_size, rows.data(), rows.size(), Z_DEFAULT_COMPRESSION);
  DDL_CHECK(status == Z_OK, "write_png: {}: zlib's compress2 failed ({})", path, zError(status));
  DDL_CHECK(compressed_size <= std::numeric_limits<std::int32_t>::max(),
            "write_png: {}: the compressed image of {} bytes exceeds one PNG chunk (2^31 - 1 bytes)", path,
            compressed_size);
  compressed.resize(compressed_size);

  std::vector<std::uint8_t> header;
  append_big_endian(header, static_cast<std::uint32_t>(image.width));
  append_big_endian(header, static_cast<std::uint32_t>(image.height));
  // Bit depth 8; colour type 0 (gray) or 2 (RGB); compression, filter and interlace methods 0.
  header.insert(header.end(), {8, static_cast<std::uint8_t>(image.channels == 1 ? 0 : 2), 0, 0, 0});

  std::vector<std::uint8_t> file(kSignature.begin(), kSignature.end());
  append_chunk(file, "IHDR", header);
  append_chunk(file, "IDAT", compressed);
  append_chunk(file, "IEND", {});
  return file;
}

// A float32 [H, W] tensor's values on the host, checked finite.
std::vector<float> image_values(const Tensor& values) {
  DDL_CHECK(values.defined() && values.dtype() == DType::Float32 && values.dim() == 2 && values.numel() > 0,
            "grayscale_image: expected a float32 image [H, W] with H, W >= 1, got {} {}",
            values.defined() ? values.dtype() : DType::Float32, values.defined() ? values.shape() : Shape{});
  std::vector<float> host = values.to(cpu()).to_vector<float>();
  const auto bad = std::find_if(host.begin(), host.end(), [](float v) { return !std::isfinite(v); });
  DDL_CHECK(bad == host.end(), "grayscale_image: value {} at ({}, {}) is not finite", *bad,
            (bad - host.begin()) / values.size(1), (bad - host.begin()) % values.size(1));
  return host;
}

Image gray_from(const std::vector<float>& host, const Tensor& values, float low, float high) {
  Image image{values.size(0), values.size(1), 1, std::vector<std::uint8_t>(host.size())};
  const double scale = high > low ? 255.0 / (static_cast<double>(high) - low) : 0.0;
  std::transform(host.begin(), host.end(), image.pixels.begin(), [&](float v) {
    const double level = std::clamp((static_cast<double>(v) - low) * scale, 0.0, 255.0);
    return static_cast<std::uint8_t>(std::lround(level));
  });
  return image;
}

}  // namespace

void write_png(const std::string& path, const Image& image) {
  DDL_CHECK(image.channels == 1 || image.channels == 3,
            "write_png: {}: images have 1 (gray) or 3 (RGB) channels, got {}", path, image.channels);
  DDL_CHECK(image.height >= 1 && image.height <= kMaxSide && image.width >= 1 && image.width <= kMaxSide,
            "write_png: {}: height and width must be in [1, 2^31 - 1], got {} x {}", path, image.height, image.width);
  const auto expected = static_cast<std::size_t>(image.height) * static_cast<std::size_t>(image.width) *
                        static_cast<std::size_t>(image.channels);
  DDL_CHECK(image.pixels.size() == expected, "write_png: {}: a {} x {} image of {} channel(s) has {} bytes, got {}",
            path, image.height, image.width, image.channels, expected, image.pixels.size());
  const std::vector<std::uint8_t> bytes = encode_png(path, image);
  write_file_atomically(path, {reinterpret_cast<const char*>(bytes.data()), bytes.size()}, "write_png");
}

Image grayscale_image(const Tensor& values, float low, float high) {
  DDL_CHECK(std::isfinite(low) && std::isfinite(high) && low < high,
            "grayscale_image: needs finite low < high, got low {} and high {}", low, high);
  return gray_from(image_values(values), values, low, high);
}

Image grayscale_image(const Tensor& values) {
  const std::vector<float> host = image_values(values);
  const auto [low, high] = std::minmax_element(host.begin(), host.end());
  return gray_from(host, values, *low, *high);
}

Image class_image(const Tensor& classes) {
  DDL_CHECK(classes.defined() && (classes.dtype() == DType::Int64 || classes.dtype() == DType::Int32) &&
                classes.dim() == 2 && classes.numel() > 0,
            "class_image: expected int32 or int64 labels [H, W] with H, W >= 1, got {} {}",
            classes.defined() ? classes.dtype() : DType::Int64, classes.defined() ? classes.shape() : Shape{});
  const Tensor host = classes.to(cpu());
  std::vector<std::int64_t> values;
  if (host.dtype() == DType::Int64) {
    values = host.to_vector<std::int64_t>();
  } else {
    const auto narrow = host.to_vector<std::int32_t>();
    values.assign(narrow.begin(), narrow.end());
  }
  Image image{classes.size(0), classes.size(1), 3, {}};
  image.pixels.reserve(values.size() * 3);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t label = values[i];
    DDL_CHECK(label >= 0 && label < static_cast<std::int64_t>(kClassPalette.size()),
              "class_image: label {} at ({}, {}) has no colour (the palette has {})", label,
              static_cast<std::int64_t>(i) / classes.size(1), static_cast<std::int64_t>(i) % classes.size(1),
              kClassPalette.size());
    const auto& colour = kClassPalette[static_cast<std::size_t>(label)];
    image.pixels.insert(image.pixels.end(), colour.begin(), colour.end());
  }
  return image;
}

}  // namespace ddl::models
