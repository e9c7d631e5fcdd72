// The checkpoint file (format table in checkpoint.hpp): an atomic writer
// (temp file, fsync, rename, fsync of the directory) and a loader that checks
// the size and CRC-32 of the whole payload before parsing it, then every
// field against the bytes that remain, so a damaged file ends in a ddl::Error
// naming it and never in a huge allocation.
#include <ddl/layers/named_tensors.hpp>
#include <ddl/optim/engine/checkpoint.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>

#include <fmt/ranges.h>

#include <ddl/core/check.hpp>

namespace ddl::optim {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint format is little-endian and is written with memcpy of host integers");

namespace {

// What follows a checkpoint's name in its temp file, before the writer's pid:
// ".tmp.<host>." keeps writers on hosts sharing a file system apart, so a
// host removes only its own dead processes' files.
std::string temp_marker() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) return ".tmp.";
  return fmt::format(".tmp.{}.", host.data());
}

constexpr std::array<char, 8> kMagic{'D', 'D', 'L', 'C', 'K', 'P', 'T', '\0'};
constexpr std::size_t kHeaderSize = 8 + 4 + 4 + 8 + 4;
constexpr std::size_t kChunk = std::size_t{1} << 20;  // CRC pass read size

std::uint8_t dtype_code(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return 0;
    case DType::Int32:
      return 1;
    case DType::Int64:
      return 2;
  }
  return 255;
}

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t n) {
  const auto* bytes = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib takes uInt lengths
    const std::size_t part = std::min<std::size_t>(n, std::size_t{1} << 30);
    crc = static_cast<std::uint32_t>(::crc32(crc, bytes, static_cast<uInt>(part)));
    bytes += part;
    n -= part;
  }
  return crc;
}

struct FileClose {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileClose>;

// Removes the temp file on every path out of write_checkpoint_file but the
// successful rename.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::string path) : path_(std::move(path)) {}
  ~TempFileGuard() {
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void commit() { committed_ = true; }

 private:
  std::string path_;
  bool committed_ = false;
};

// Writes the payload through stdio, accumulating its length and CRC-32.
class PayloadWriter {
 public:
  PayloadWriter(std::FILE* file, const std::string& path) : file_(file), path_(path) {}

  void bytes(const void* data, std::size_t n) {
    if (n == 0) return;
    const std::size_t written = std::fwrite(data, 1, n, file_);
    DDL_CHECK(written == n, "write_checkpoint_file: {}: write failed: {}", path_, std::strerror(errno));
    crc_ = crc32_update(crc_, data, n);
    length_ += n;
  }
  template <class T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
  void name(const std::string& text) {
    value(static_cast<std::uint32_t>(text.size()));
    bytes(text.data(), text.size());
  }

  std::uint32_t crc() const { return crc_; }
  std::uint64_t length() const { return length_; }

 private:
  std::FILE* file_;
  const std::string& path_;
  std::uint32_t crc_ = static_cast<std::uint32_t>(::crc32(0L, Z_NULL, 0));
  std::uint64_t length_ = 0;
};

void check_name(const std::string& path, const std::string& name, const char* kind) {
  DDL_CHECK(!name.empty() && name.size() <= kCheckpointMaxNameLength,
            "write_checkpoint_file: {}: {} name '{:.64}' has {} bytes (allowed: 1 to {})", path, kind, name, name.size(),
            kCheckpointMaxNameLength);
}

void write_payload(PayloadWriter& out, const Checkpoint& checkpoint) {
  out.value(static_cast<std::uint32_t>(checkpoint.tensors.size()));
  for (const auto& [name, tensor] : checkpoint.tensors) {
    out.name(name);
    out.value(dtype_code(tensor.dtype()));
    out.value(static_cast<std::uint8_t>(tensor.dim()));
    for (int d = 0; d < tensor.dim(); ++d) out.value(static_cast<std::int64_t>(tensor.size(d)));
    out.value(static_cast<std::uint64_t>(tensor.nbytes()));
    // Host memory is written as it is; device tensors go through one host copy each.
    const Tensor host = tensor.device().is_cpu() ? tensor : tensor.detach().to(cpu());
    if (host.nbytes() > 0) out.bytes(host.raw_data(), host.nbytes());
  }
  out.value(static_cast<std::uint32_t>(checkpoint.integers.size()));
  for (const auto& [name, value] : checkpoint.integers) {
    out.name(name);
    out.value(value);
  }
  out.value(static_cast<std::uint32_t>(checkpoint.strings.size()));
  for (const auto& [name, value] : checkpoint.strings) {
    out.name(name);
    out.value(static_cast<std::uint32_t>(value.size()));
    out.bytes(value.data(), value.size());
  }
}

std::array<char, kHeaderSize> encode_header(std::uint64_t payload_length, std::uint32_t crc) {
  std::array<char, kHeaderSize> header{};
  const std::uint32_t version = kCheckpointVersion, flags = 0;
  std::memcpy(header.data(), kMagic.data(), 8);
  std::memcpy(header.data() + 8, &version, 4);
  std::memcpy(header.data() + 12, &flags, 4);
  std::memcpy(header.data() + 16, &payload_length, 8);
  std::memcpy(header.data() + 24, &crc, 4);
  return header;
}

// fsync of the directory makes the rename itself durable. Filesystems that
// cannot sync a directory say EINVAL; nothing more can be done there.
void sync_directory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string directory = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DDL_CHECK(fd >= 0, "write_checkpoint_file: {}: cannot open directory {} to sync it: {}", path, directory,
            std::strerror(errno));
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  DDL_CHECK(result == 0 || error == EINVAL, "write_checkpoint_file: {}: fsync of directory {} failed: {}", path, directory,
            std::strerror(error));
}

// Reads the payload field by field; every read is checked against the bytes
// the payload has left, which bounds every allocation by the file's size.
class PayloadReader {
 public:
  PayloadReader(std::FILE* file, const std::string& path, std::uint64_t length)
      : file_(file), path_(path), remaining_(length) {}

  std::uint64_t remaining() const { return remaining_; }

  // A section count is plausible only if that many records of at least
  // `min_record` bytes fit in what is left (so no loop runs for billions).
  std::uint32_t count(const std::string& what, std::uint64_t min_record) {
    const auto n = value<std::uint32_t>("the " + what + " count");
    DDL_CHECK(n <= remaining_ / min_record,
              "read_checkpoint_file: {}: implausible {} count {}: the payload has only {} bytes left", path_, what, n,
              remaining_);
    return n;
  }

  void bytes(void* out, std::uint64_t n, const std::string& what) {
    DDL_CHECK(n <= remaining_, "read_checkpoint_file: {}: implausible size: {} needs {} bytes but the payload has {} left",
              path_, what, n, remaining_);
    if (n == 0) return;
    const std::size_t got = std::fread(out, 1, static_cast<std::size_t>(n), file_);
    DDL_CHECK(got == n, "read_checkpoint_file: {}: read failed in {}: {}", path_, what,
              std::ferror(file_) ? std::strerror(errno) : "unexpected end of file");
    remaining_ -= n;
  }
  template <class T>
  T value(const std::string& what) {
    T v{};
    bytes(&v, sizeof v, what);
    return v;
  }
  std::string name(const std::string& what) {
    const auto length = value<std::uint32_t>(what + " name length");
    DDL_CHECK(length >= 1 && length <= kCheckpointMaxNameLength,
              "read_checkpoint_file: {}: implausible name length {} for {} (allowed: 1 to {})", path_, length, what,
              kCheckpointMaxNameLength);
    std::string text(length, '\0');
    bytes(text.data(), length, what + " name");
    return text;
  }

 private:
  std::FILE* file_;
  const std::string& path_;
  std::uint64_t remaining_;
};

Tensor read_tensor(PayloadReader& in, const std::string& path, const std::string& name) {
  const std::string what = fmt::format("tensor '{:.64}'", name);
  const auto code = in.value<std::uint8_t>(what + " dtype");
  DDL_CHECK(code <= 2, "read_checkpoint_file: {}: {} has unknown dtype code {}", path, what, code);
  const DType dtype = code == 0 ? DType::Float32 : code == 1 ? DType::Int32 : DType::Int64;
  const auto rank = in.value<std::uint8_t>(what + " rank");
  DDL_CHECK(rank <= Shape::kMaxDims, "read_checkpoint_file: {}: implausible rank {} for {} (at most {})", path, rank, what,
            Shape::kMaxDims);
  std::vector<std::int64_t> dims(rank);
  for (auto& dim : dims) dim = in.value<std::int64_t>(what + " dims");
  // Dims whose product overflows are refused before Shape ever multiplies
  // them; a zero dim makes any other extents legal (an empty tensor).
  const std::uint64_t max_elements =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / element_size(dtype);
  std::uint64_t product = 1;
  bool empty = false;
  for (const std::int64_t dim : dims) {
    DDL_CHECK(dim >= 0, "read_checkpoint_file: {}: {} has a negative dimension ({})", path, what, dim);
    const auto extent = static_cast<std::uint64_t>(dim);
    if (extent == 0) {
      empty = true;
      continue;
    }
    DDL_CHECK(extent <= max_elements / product,
              "read_checkpoint_file: {}: implausible shape for {}: the element count of dims [{}] overflows", path, what,
              fmt::join(dims, ", "));
    product *= extent;
  }
  const std::uint64_t numel = empty ? 0 : product;
  const auto byte_count = in.value<std::uint64_t>(what + " byte count");
  DDL_CHECK(byte_count == numel * element_size(dtype),
            "read_checkpoint_file: {}: {} has byte count {} but its {} dims [{}] need {}", path, what, byte_count, dtype,
            fmt::join(dims, ", "), numel * element_size(dtype));
  // Checked before allocating: the data must be in the file.
  DDL_CHECK(byte_count <= in.remaining(),
            "read_checkpoint_file: {}: implausible size: {} claims {} bytes of data but the payload has {} left", path, what,
            byte_count, in.remaining());
  Tensor tensor = Tensor::empty(Shape(dims), {dtype, cpu(), false});
  in.bytes(byte_count > 0 ? tensor.raw_data() : nullptr, byte_count, what + " data");
  return tensor;
}

// Opens `path` and checks everything that does not need parsing: magic,
// version, flags, size and CRC. Leaves the file positioned at the payload.
File open_and_verify(const std::string& path, std::uint64_t& payload_length) {
  std::error_code error;
  DDL_CHECK(std::filesystem::exists(path, error), "read_checkpoint_file: {}: no such file", path);
  DDL_CHECK(!std::filesystem::is_directory(path, error), "read_checkpoint_file: {}: is a directory, not a checkpoint", path);
  File file(std::fopen(path.c_str(), "rbe"));
  DDL_CHECK(file != nullptr, "read_checkpoint_file: {}: cannot open: {}", path, std::strerror(errno));
  struct stat info {};
  DDL_CHECK(::fstat(::fileno(file.get()), &info) == 0, "read_checkpoint_file: {}: cannot stat: {}", path,
            std::strerror(errno));
  const auto file_size = static_cast<std::uint64_t>(info.st_size);

  std::array<char, kHeaderSize> header{};
  const std::size_t got = std::fread(header.data(), 1, kHeaderSize, file.get());
  DDL_CHECK(!std::ferror(file.get()), "read_checkpoint_file: {}: read failed: {}", path, std::strerror(errno));
  const std::size_t magic_bytes = std::min<std::size_t>(got, kMagic.size());
  DDL_CHECK(std::memcmp(header.data(), kMagic.data(), magic_bytes) == 0,
            "read_checkpoint_file: {}: not a ddl checkpoint (bad magic: the file does not start with \"DDLCKPT\\0\")", path);
  DDL_CHECK(got == kHeaderSize, "read_checkpoint_file: {}: truncated: the file has {} bytes, the header alone needs {}",
            path, got, kHeaderSize);
  std::uint32_t version = 0, flags = 0, stored_crc = 0;
  std::memcpy(&version, header.data() + 8, 4);
  std::memcpy(&flags, header.data() + 12, 4);
  std::memcpy(&payload_length, header.data() + 16, 8);
  std::memcpy(&stored_crc, header.data() + 24, 4);
  DDL_CHECK(version == kCheckpointVersion, "read_checkpoint_file: {}: unsupported version {} (this build reads version {})",
            path, version, kCheckpointVersion);
  DDL_CHECK(flags == 0, "read_checkpoint_file: {}: unsupported flags {:#x} (version {} defines none)", path, flags,
            kCheckpointVersion);
  const std::uint64_t actual = file_size - kHeaderSize;
  DDL_CHECK(payload_length <= actual,
            "read_checkpoint_file: {}: truncated: the header promises a {}-byte payload but the file holds only {} bytes "
            "after the header",
            path, payload_length, actual);
  DDL_CHECK(payload_length == actual, "read_checkpoint_file: {}: trailing garbage: {} bytes after the {}-byte payload", path,
            actual - payload_length, payload_length);

  std::vector<char> buffer(static_cast<std::size_t>(std::min<std::uint64_t>(payload_length, kChunk)));
  std::uint32_t crc = static_cast<std::uint32_t>(::crc32(0L, Z_NULL, 0));
  for (std::uint64_t left = payload_length; left > 0;) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer.size()));
    DDL_CHECK(std::fread(buffer.data(), 1, n, file.get()) == n, "read_checkpoint_file: {}: read failed: {}", path,
              std::ferror(file.get()) ? std::strerror(errno) : "the file shrank while being read");
    crc = crc32_update(crc, buffer.data(), n);
    left -= n;
  }
  DDL_CHECK(crc == stored_crc,
            "read_checkpoint_file: {}: checksum mismatch: the header says CRC-32 {:08x} but the payload's is {:08x} (the "
            "file is corrupt)",
            path, stored_crc, crc);
  DDL_CHECK(std::fseek(file.get(), static_cast<long>(kHeaderSize), SEEK_SET) == 0,
            "read_checkpoint_file: {}: seek failed: {}", path, std::strerror(errno));
  return file;
}

}  // namespace

void write_checkpoint_file(const std::string& path, const Checkpoint& checkpoint) {
  // Everything that can be checked is checked before a byte is written.
  std::set<std::string> seen;
  for (const auto& [name, tensor] : checkpoint.tensors) {
    check_name(path, name, "tensor");
    DDL_CHECK(seen.insert(name).second, "write_checkpoint_file: {}: tensor name '{}' appears twice", path, name);
    DDL_CHECK(tensor.defined(), "write_checkpoint_file: {}: tensor '{}' is undefined", path, name);
  }
  for (const auto& entry : checkpoint.integers) check_name(path, entry.first, "integer");
  for (const auto& [name, value] : checkpoint.strings) {
    check_name(path, name, "string");
    DDL_CHECK(value.size() <= std::numeric_limits<std::uint32_t>::max(),
              "write_checkpoint_file: {}: string '{}' is longer than 4 GiB", path, name);
  }
  DDL_CHECK(checkpoint.tensors.size() <= std::numeric_limits<std::uint32_t>::max(),
            "write_checkpoint_file: {}: too many tensors ({})", path, checkpoint.tensors.size());

  const std::string temp = checkpoint_temp_path(path);
  TempFileGuard guard(temp);
  File file(std::fopen(temp.c_str(), "wbe"));
  DDL_CHECK(file != nullptr, "write_checkpoint_file: {}: cannot create temp file {}: {}", path, temp, std::strerror(errno));

  // The header's length and CRC are known only after the payload: write a
  // placeholder, then the payload, then the real header over it.
  const auto placeholder = encode_header(0, 0);
  DDL_CHECK(std::fwrite(placeholder.data(), 1, kHeaderSize, file.get()) == kHeaderSize,
            "write_checkpoint_file: {}: write failed: {}", path, std::strerror(errno));
  PayloadWriter out(file.get(), path);
  write_payload(out, checkpoint);
  const auto header = encode_header(out.length(), out.crc());
  DDL_CHECK(
      std::fseek(file.get(), 0, SEEK_SET) == 0 && std::fwrite(header.data(), 1, kHeaderSize, file.get()) == kHeaderSize,
      "write_checkpoint_file: {}: write failed: {}", path, std::strerror(errno));
  DDL_CHECK(std::fflush(file.get()) == 0, "write_checkpoint_file: {}: write failed: {}", path, std::strerror(errno));
  DDL_CHECK(::fsync(::fileno(file.get())) == 0, "write_checkpoint_file: {}: fsync failed: {}", path, std::strerror(errno));
  const int closed = std::fclose(file.release());
  DDL_CHECK(closed == 0, "write_checkpoint_file: {}: close failed: {}", path, std::strerror(errno));
  DDL_CHECK(std::rename(temp.c_str(), path.c_str()) == 0, "write_checkpoint_file: {}: cannot rename {} over it: {}", path,
            temp, std::strerror(errno));
  guard.commit();
  sync_directory(path);
}

std::string checkpoint_temp_path(const std::string& path) {
  return fmt::format("{}{}{}", path, temp_marker(), static_cast<long>(::getpid()));
}

std::vector<std::string> remove_stale_temp_files(const std::string& directory) {
  std::vector<std::string> removed;
  std::error_code error;
  const std::string marker = temp_marker();
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    const std::size_t at = name.rfind(marker);
    if (at == std::string::npos) continue;
    const std::string pid_text = name.substr(at + marker.size());
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(pid_text);
    // kill(pid, 0) fails with ESRCH only when no such process exists; a
    // living writer (of this run or another) keeps its file.
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (std::filesystem::remove(entry.path(), error)) removed.push_back(entry.path().string());
  }
  return removed;
}

Checkpoint read_checkpoint_file(const std::string& path, const Device& device) {
  check_device_exists(device);
  std::uint64_t payload_length = 0;
  const File file = open_and_verify(path, payload_length);
  PayloadReader in(file.get(), path, payload_length);

  Checkpoint result;
  std::set<std::string> tensor_names;
  const auto tensor_count = in.count("tensor", 4 + 1 + 1 + 1 + 8);  // name, dtype, rank, byte count
  for (std::uint32_t i = 0; i < tensor_count; ++i) {
    std::string name = in.name(fmt::format("tensor {}", i));
    DDL_CHECK(tensor_names.insert(name).second, "read_checkpoint_file: {}: tensor name '{}' appears twice", path, name);
    Tensor tensor = read_tensor(in, path, name);
    result.tensors.emplace_back(std::move(name), device == cpu() ? tensor : tensor.to(device));
  }
  const auto integer_count = in.count("integer", 4 + 1 + 8);
  for (std::uint32_t i = 0; i < integer_count; ++i) {
    std::string name = in.name(fmt::format("integer {}", i));
    const auto value = in.value<std::int64_t>(fmt::format("integer '{:.64}'", name));
    DDL_CHECK(result.integers.emplace(name, value).second, "read_checkpoint_file: {}: integer name '{}' appears twice", path,
              name);
  }
  const auto string_count = in.count("string", 4 + 1 + 4);
  for (std::uint32_t i = 0; i < string_count; ++i) {
    std::string name = in.name(fmt::format("string {}", i));
    const std::string what = fmt::format("string '{:.64}'", name);
    const auto length = in.value<std::uint32_t>(what + " length");
    DDL_CHECK(length <= in.remaining(),
              "read_checkpoint_file: {}: implausible size: {} claims {} bytes but the payload has {} left", path, what,
              length, in.remaining());
    std::string value(length, '\0');
    in.bytes(value.data(), length, what);
    DDL_CHECK(result.strings.emplace(name, std::move(value)).second,
              "read_checkpoint_file: {}: string name '{}' appears twice", path, name);
  }
  DDL_CHECK(in.remaining() == 0, "read_checkpoint_file: {}: {} unparsed bytes at the end of the payload", path,
            in.remaining());
  return result;
}

void add_tensors(Checkpoint& checkpoint, const std::string& prefix,
                 const std::vector<std::pair<std::string, Tensor>>& named) {
  for (const auto& [name, tensor] : named) checkpoint.tensors.emplace_back(prefix + name, tensor);
}

std::vector<std::pair<std::string, Tensor>> tensors_with_prefix(const Checkpoint& checkpoint,
                                                                const std::string& prefix) {
  std::vector<std::pair<std::string, Tensor>> result;
  for (const auto& [name, tensor] : checkpoint.tensors) {
    if (name.starts_with(prefix)) result.emplace_back(name.substr(prefix.size()), tensor);
  }
  return result;
}

void restore_tensors(const Checkpoint& checkpoint, const std::string& prefix,
                     const std::vector<std::pair<std::string, Tensor>>& targets) {
  layers::copy_by_name("restore_tensors", targets, tensors_with_prefix(checkpoint, prefix),
                       {.name_prefix = prefix, .sources_name = "the checkpoint"});
}

}  // namespace ddl::optim
