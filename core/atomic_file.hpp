// Writing a whole file so that no reader ever sees half of it: the bytes go
// to a temporary file beside `path`, which is flushed, fsynced and renamed
// over `path`. A crash or a full disk leaves the old file (or none), never a
// truncated one. For small outputs written in one go (PNG images, traces);
// checkpoints stream through their own writer (optim/engine/checkpoint.cpp).
#pragma once

#include <span>
#include <string>

namespace ddl {

// Throws ddl::Error "<writer>: <path>: <what failed>: <errno text>" and
// removes the temporary file when any step fails.
void write_file_atomically(const std::string& path, std::span<const char> bytes, const char* writer);

}  // namespace ddl
