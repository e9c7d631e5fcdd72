// optim::read_checkpoint_file on any bytes. The first byte is a mode: odd,
// the target first writes the right payload length and CRC-32 into the
// header (as a writer would), so mutations reach the field parser instead
// of dying at the checksum; even, the bytes are the file as they are. The
// reader returns a whole checkpoint or throws ddl::Error; what it returns,
// written by write_checkpoint_file, reads back the same.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <ddl/optim/engine/checkpoint.hpp>

#include "support.hpp"

namespace {

constexpr std::size_t kHeaderSize = 28;  // checkpoint.hpp's format table

// Sets the header's payload length (offset 16) and CRC-32 (offset 24) to
// those of the bytes after it.
void repair_header(std::vector<std::uint8_t>& file) {
  if (file.size() < kHeaderSize) return;
  const std::uint64_t length = file.size() - kHeaderSize;
  const auto crc =
      static_cast<std::uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), file.data() + kHeaderSize, static_cast<uInt>(length)));
  std::memcpy(file.data() + 16, &length, sizeof length);
  std::memcpy(file.data() + 24, &crc, sizeof crc);
}

bool same_tensor(const ddl::Tensor& a, const ddl::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
}

bool same(const ddl::optim::Checkpoint& a, const ddl::optim::Checkpoint& b) {
  if (a.integers != b.integers || a.strings != b.strings || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    if (a.tensors[i].first != b.tensors[i].first || !same_tensor(a.tensors[i].second, b.tensors[i].second))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddl;
  if (size == 0) return 0;
  static const fuzz::TempFile input(".ckpt");
  static const fuzz::TempFile rewritten(".rewritten.ckpt");
  std::vector<std::uint8_t> file(data + 1, data + size);
  if (data[0] % 2 == 1) repair_header(file);
  optim::Checkpoint checkpoint;
  if (!fuzz::parses([&] { checkpoint = optim::read_checkpoint_file(input.write(file)); })) return 0;

  optim::write_checkpoint_file(rewritten.path(), checkpoint);
  fuzz::require(same(optim::read_checkpoint_file(rewritten.path()), checkpoint),
                "read_checkpoint_file(write_checkpoint_file(c)) == c");
  return 0;
}
