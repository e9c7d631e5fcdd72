// IDX reading and writing through zlib's gz* functions, which read gzip'd
// and raw files alike. Every malformed file ends in a ddl::Error naming the
// file; the result is built in a local and returned only when complete.
#include <ddl/models/data/idx.hpp>

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/ranges.h>

#include <ddl/core/check.hpp>
#include <ddl/core/shape.hpp>

namespace ddl::models {
namespace {

struct GzClose {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

// zlib's description of the last error on `file`, or of errno.
std::string gz_error(gzFile file) {
  int code = Z_OK;
  const char* message = gzerror(file, &code);
  if (code == Z_ERRNO) return std::strerror(errno);
  return message != nullptr && *message != '\0' ? message : "unknown zlib error";
}

// Reads up to n bytes; returns how many were read (fewer only at the end).
std::size_t read_some(gzFile file, std::uint8_t* out, std::size_t n, const std::string& path) {
  std::size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
    const int got = gzread(file, out + done, chunk);
    DDL_CHECK(got >= 0, "read_idx: {}: read error: {}", path, gz_error(file));
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

const char* type_name(int code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "not an IDX type";
  }
}

}  // namespace

std::int64_t IdxArray::numel() const {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n *= d;
  return n;
}

IdxArray read_idx(const std::string& path) {
  std::error_code error;
  DDL_CHECK(std::filesystem::is_regular_file(path, error), "read_idx: {}: no such file", path);
  GzFile file(gzopen(path.c_str(), "rb"));
  DDL_CHECK(file != nullptr, "read_idx: {}: cannot open: {}", path, std::strerror(errno));
  gzbuffer(file.get(), 1 << 17);

  std::array<std::uint8_t, 4> magic{};
  DDL_CHECK(read_some(file.get(), magic.data(), 4, path) == 4,
            "read_idx: {}: truncated: shorter than the 4-byte magic number", path);
  DDL_CHECK(magic[0] == 0 && magic[1] == 0,
            "read_idx: {}: bad magic number {:02x} {:02x} {:02x} {:02x}: an IDX file starts with 00 00", path, magic[0],
            magic[1], magic[2], magic[3]);
  DDL_CHECK(magic[2] == kIdxUnsignedByte,
            "read_idx: {}: unsupported type code 0x{:02X} ({}); only 0x08 (unsigned byte) is supported", path, magic[2],
            type_name(magic[2]));
  const int rank = magic[3];
  DDL_CHECK(rank >= 1 && rank <= Shape::kMaxDims, "read_idx: {}: {} dimensions; expected 1 to {}", path, rank,
            Shape::kMaxDims);

  IdxArray result;
  std::vector<std::uint8_t> header(static_cast<std::size_t>(rank) * 4);
  DDL_CHECK(read_some(file.get(), header.data(), header.size(), path) == header.size(),
            "read_idx: {}: truncated: the header promises {} dimensions but ends early", path, rank);
  for (int d = 0; d < rank; ++d) {
    const std::uint8_t* b = header.data() + 4 * d;
    result.dims.push_back((std::int64_t{b[0]} << 24) | (std::int64_t{b[1]} << 16) | (std::int64_t{b[2]} << 8) |
                          std::int64_t{b[3]});
  }
  // Extents are < 2^32 each. The product of the non-zero ones is capped at
  // 2^40, checked before each multiplication, so no product overflows, here
  // or later in Shape::numel (a zero extent anywhere does not excuse the others).
  constexpr std::int64_t kMaxValues = std::int64_t{1} << 40;
  std::int64_t nonzero_product = 1;
  bool empty = false;
  for (const std::int64_t extent : result.dims) {
    if (extent == 0) {
      empty = true;
      continue;
    }
    DDL_CHECK(nonzero_product <= kMaxValues / extent,
              "read_idx: {}: implausible dims [{}]: the header promises more than 2^40 values", path,
              fmt::join(result.dims, ", "));
    nonzero_product *= extent;
  }
  const std::int64_t total = empty ? 0 : nonzero_product;

  // Grow the buffer as data arrives rather than trusting the header's size:
  // each read asks for as much as there is already (1 MiB at first), so a
  // short file whose header promises terabytes costs a megabyte, not the
  // promise, and a real one is read in a few doublings.
  constexpr std::size_t kFirstRead = std::size_t{1} << 20;
  const auto expected = static_cast<std::size_t>(total);
  std::size_t have = 0;
  while (have < expected) {
    const std::size_t want = std::min(std::max(kFirstRead, have), expected - have);
    result.data.resize(have + want);
    const std::size_t got = read_some(file.get(), result.data.data() + have, want, path);
    have += got;
    DDL_CHECK(got == want, "read_idx: {}: truncated: the header promises {} values of shape {} but the file holds {}",
              path, expected, Shape(result.dims), have);
  }
  std::uint8_t extra = 0;
  DDL_CHECK(read_some(file.get(), &extra, 1, path) == 0,
            "read_idx: {}: trailing data after the {} values the header promises", path, expected);
  return result;
}

void write_idx(const std::string& path, const IdxArray& array, bool gzip) {
  const int rank = static_cast<int>(array.dims.size());
  DDL_CHECK(rank >= 1 && rank <= Shape::kMaxDims, "write_idx: {}: {} dimensions; expected 1 to {}", path, rank,
            Shape::kMaxDims);
  DDL_CHECK(static_cast<std::size_t>(array.numel()) == array.data.size(),
            "write_idx: {}: dims {} hold {} values but data has {}", path, Shape(array.dims), array.numel(),
            array.data.size());
  std::vector<std::uint8_t> header = {0, 0, kIdxUnsignedByte, static_cast<std::uint8_t>(rank)};
  for (const std::int64_t extent : array.dims) {
    DDL_CHECK(extent >= 0 && extent <= 0xFFFFFFFFll, "write_idx: {}: extent {} does not fit in 32 bits", path, extent);
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<std::uint8_t>(extent >> shift));
  }
  // "wb" compresses, "wbT" writes the bytes as they are.
  GzFile file(gzopen(path.c_str(), gzip ? "wb" : "wbT"));
  DDL_CHECK(file != nullptr, "write_idx: {}: cannot open for writing: {}", path, std::strerror(errno));
  auto write_all = [&](const std::uint8_t* bytes, std::size_t n) {
    while (n > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30));
      const int put = gzwrite(file.get(), bytes, chunk);
      DDL_CHECK(put > 0, "write_idx: {}: write error: {}", path, gz_error(file.get()));
      bytes += put;
      n -= static_cast<std::size_t>(put);
    }
  };
  write_all(header.data(), header.size());
  write_all(array.data.data(), array.data.size());
  DDL_CHECK(gzclose(file.release()) == Z_OK, "write_idx: {}: error while closing the file", path);
}

Tensor idx_to_float(const IdxArray& array, float scale) {
  Tensor result = Tensor::empty(Shape(array.dims), TensorOptions{}.with_dtype(DType::Float32));
  float* out = result.data<float>();
  for (std::size_t i = 0; i < array.data.size(); ++i) out[i] = static_cast<float>(array.data[i]) * scale;
  return result;
}

Tensor idx_to_int64(const IdxArray& array) {
  Tensor result = Tensor::empty(Shape(array.dims), TensorOptions{}.with_dtype(DType::Int64));
  auto* out = result.data<std::int64_t>();
  for (std::size_t i = 0; i < array.data.size(); ++i) out[i] = array.data[i];
  return result;
}

}  // namespace ddl::models
