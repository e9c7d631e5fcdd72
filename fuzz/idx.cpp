// models::read_idx on any bytes, raw or gzip'd (zlib tells them apart, and
// the corpus has both): it returns a complete array or throws ddl::Error.
// An array it returns survives write_idx and read_idx again unchanged.
#include <cstdint>

#include <ddl/models/data/idx.hpp>

#include "support.hpp"

namespace {

bool same(const ddl::models::IdxArray& a, const ddl::models::IdxArray& b) {
  return a.dims == b.dims && a.data == b.data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddl;
  static const fuzz::TempFile input(".idx");
  static const fuzz::TempFile rewritten(".idx.gz");
  models::IdxArray array;
  if (!fuzz::parses([&] { array = models::read_idx(input.write({data, size})); })) return 0;

  fuzz::require(array.numel() == static_cast<std::int64_t>(array.data.size()), "read_idx: values match the dims");
  // Compressed or not by the input's parity, so both writers are exercised.
  models::write_idx(rewritten.path(), array, size % 2 == 1);
  fuzz::require(same(models::read_idx(rewritten.path()), array), "read_idx(write_idx(a)) == a");
  const Tensor pixels = models::idx_to_float(array, 1.0f / 255);
  fuzz::require(pixels.numel() == array.numel(), "idx_to_float keeps every value");
  return 0;
}
