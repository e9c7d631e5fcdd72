// Checkpoints, what exact resume rests on: named tensors, integers and strings in one documented binary file,
// written atomically (temp file, fsync, rename) and validated completely on
// load, so a crash never leaves a half-written checkpoint and a damaged file
// is an error naming the file and the problem, never a crash or a silent
// wrong resume.
//
// File format, version 1. Every integer is little-endian; the header is 28
// bytes, the payload follows it and ends the file.
//
//   offset  size  field
//   ------  ----  ---------------------------------------------------------
//        0     8  magic "DDLCKPT\0"
//        8     4  u32 version = 1
//       12     4  u32 flags = 0 (no flag is defined yet)
//       16     8  u64 payload length in bytes (the file is 28 + this long)
//       24     4  u32 CRC-32 of the payload (zlib's crc32, the IEEE 802.3
//                 polynomial of gzip and PNG)
//       28     -  payload:
//
//   payload   size  field
//   -------   ----  -------------------------------------------------------
//                4  u32 number of tensors, then for each tensor:
//                4    u32 name length (1 .. 4096)
//                n    name bytes (UTF-8, no terminator)
//                1    u8 dtype: 0 float32, 1 int32, 2 int64
//                1    u8 rank (0 .. 6; 0 is a scalar)
//           8·rank    i64 dims, outermost first, each >= 0
//                8    u64 byte count = product(dims) · element size
//            bytes    the elements, row-major, little-endian
//                4  u32 number of integers, then for each:
//                4    u32 name length (1 .. 4096), name bytes
//                8    i64 value
//                4  u32 number of strings, then for each:
//                4    u32 name length (1 .. 4096), name bytes
//                4    u32 value length, value bytes
//
// Names are unique within each of the three sections. The loader checks, in
// this order: the file exists and is readable; the magic; the version and
// flags; that the file is exactly 28 + payload length bytes (shorter:
// truncated; longer: trailing garbage); the CRC; then every field while
// parsing (section counts and lengths within the bytes left, names <= 4 KiB,
// rank <= 6, dims >= 0, the product of the non-zero dims within int64, the
// byte count equal to elements · element size and within the bytes left,
// known dtypes, no duplicate names, the payload consumed exactly). No
// allocation is ever larger than the bytes the file actually holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ddl/core/device.hpp>
#include <ddl/core/tensor.hpp>

namespace ddl::optim {

// Everything a resumable run needs, by name. The Trainer stores the model as
// "model.<parameter>", the optimizer as "optimizer.<entry>" (Optimizer::state
// names), and integers "epoch", "step", "rng.seed", "rng.offset".
struct Checkpoint {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order
  std::map<std::string, std::int64_t> integers;
  std::map<std::string, std::string> strings;
};

inline constexpr std::uint32_t kCheckpointVersion = 1;
inline constexpr std::size_t kCheckpointMaxNameLength = 4096;

// Writes `checkpoint` to checkpoint_temp_path(path), flushes and fsyncs it, renames
// it over `path` and fsyncs the directory: readers see the old file or the
// new one, never a mix, even if the process dies mid-write. Tensors may live
// on any device (they are copied to the host one at a time). Throws ddl::Error
// naming the path and the reason (with strerror's text for I/O failures)
// after removing the temp file; an existing checkpoint at `path` is then
// untouched. Names must be 1 .. 4096 bytes and tensor names unique.
void write_checkpoint_file(const std::string& path, const Checkpoint& checkpoint);

// The temp file a checkpoint at `path` is written to first:
// path + ".tmp.<host>.<pid>".
std::string checkpoint_temp_path(const std::string& path);

// Removes from `directory` the temp files of writers on this host that no
// longer run (killed mid-write) and returns their paths; files of living
// processes and of other hosts stay.
std::vector<std::string> remove_stale_temp_files(const std::string& directory);

// Reads and validates the whole file (see the format above) and returns its
// contents with every tensor on `device`. Throws ddl::Error naming the file
// and the problem: missing, not a checkpoint (bad magic), unsupported
// version, truncated, trailing garbage, checksum mismatch, or an implausible
// field.
Checkpoint read_checkpoint_file(const std::string& path, const Device& device = cpu());

// Appends `named` to the checkpoint's tensors as `prefix` + name (the prefix
// is used verbatim: pass "model." for "model.0.weight"). Tensors are shared,
// not copied: save before changing them.
void add_tensors(Checkpoint& checkpoint, const std::string& prefix,
                 const std::vector<std::pair<std::string, Tensor>>& named);

// The checkpoint's tensors whose names start with `prefix`, with the prefix
// removed, in file order: e.g. what Optimizer::load_state takes.
std::vector<std::pair<std::string, Tensor>> tensors_with_prefix(const Checkpoint& checkpoint,
                                                                const std::string& prefix);

// Copies the tensors saved under `prefix` into `targets` (named without the
// prefix, e.g. Module::named_parameters()) in place, with Tensor::copy_from.
// First checks that the names under the prefix and the targets' names are
// the same set and that each pair agrees in shape and dtype; on the first
// mismatch (missing name, unexpected name, shape or dtype) throws ddl::Error
// naming it, before anything is modified.
void restore_tensors(const Checkpoint& checkpoint, const std::string& prefix,
                     const std::vector<std::pair<std::string, Tensor>>& targets);

}  // namespace ddl::optim
