// The IDX file format of MNIST and Fashion-MNIST (LeCun et al.,
// http://yann.lecun.com/exdb/mnist/): magic 0x00 0x00 <type> <rank>, then
// <rank> big-endian uint32 extents, then the values in row-major order.
// Files may be gzip-compressed or raw; zlib reads both transparently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::models {

// The type code of unsigned bytes, the only element type MNIST-style files
// use and the only one read_idx accepts.
constexpr std::uint8_t kIdxUnsignedByte = 0x08;

// The contents of an unsigned-byte IDX file.
struct IdxArray {
  std::vector<std::int64_t> dims;  // 1 to Shape::kMaxDims extents
  std::vector<std::uint8_t> data;  // product(dims) values, row-major

  std::int64_t numel() const;
};

// Reads an unsigned-byte IDX file, gzip'd or raw. Throws ddl::Error naming
// the file and the problem: missing or unreadable file, bad magic, a type
// code other than 0x08, no extents or more than Shape::kMaxDims, fewer
// values than the header promises, or bytes after the last value.
IdxArray read_idx(const std::string& path);

// Writes `array` as an IDX file, gzip-compressed when `gzip` is true
// (the file name is used as given). Throws ddl::Error on failure.
void write_idx(const std::string& path, const IdxArray& array, bool gzip = false);

// The values as a float32 CPU tensor of shape dims, each multiplied by
// `scale` (1/255 maps pixels to [0, 1]).
Tensor idx_to_float(const IdxArray& array, float scale = 1.0f);

// The values as an int64 CPU tensor of shape dims (class labels).
Tensor idx_to_int64(const IdxArray& array);

}  // namespace ddl::models
