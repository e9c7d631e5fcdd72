// What every fuzz target shares: the contract it checks (bad input is a
// ddl::Error, never a crash, another exception or an absurd allocation) and
// the input as a file, for ddl's readers, which take paths.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include <ddl/core/error.hpp>

namespace ddl::fuzz {

// Runs `parse`: true if it returned, false if it refused the input with a
// ddl::Error. Any other exception escapes the target, so libFuzzer reports
// the input as a crash (std::terminate), as it does a sanitizer's finding.
template <class Parse>
bool parses(Parse&& parse) {
  try {
    parse();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// A property of parsed input that does not hold (a round trip that changes
// it): printed, then a crash libFuzzer records with the input.
inline void require(bool holds, std::string_view what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz property violated: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

// A file of this process in $TMPDIR (scripts/fuzz.sh points it at memory,
// /dev/shm), rewritten for each input and removed at exit.
class TempFile {
 public:
  explicit TempFile(std::string_view suffix)
      : path_(
            (std::filesystem::temp_directory_path() / ("ddl-fuzz-" + std::to_string(::getpid()) + std::string(suffix)))
                .string()) {}
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

  const std::string& write(std::span<const std::uint8_t> bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz: cannot write %s\n", path_.c_str());
      std::exit(1);
    }
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace ddl::fuzz
