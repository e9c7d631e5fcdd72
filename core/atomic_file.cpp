// See atomic_file.hpp.
#include <ddl/core/atomic_file.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include <ddl/core/check.hpp>

namespace ddl {
namespace {

// Writes and fsyncs `temp`; the problem, or empty.
std::string write_synced(const std::string& temp, std::span<const char> bytes) {
  std::FILE* file = std::fopen(temp.c_str(), "wbe");
  if (file == nullptr) return fmt::format("cannot create {}: {}", temp, std::strerror(errno));
  std::string problem;
  if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() || std::fflush(file) != 0) {
    problem = fmt::format("cannot write {}: {}", temp, std::strerror(errno));
  } else if (::fsync(::fileno(file)) != 0) {
    problem = fmt::format("cannot fsync {}: {}", temp, std::strerror(errno));
  }
  if (std::fclose(file) != 0 && problem.empty())
    problem = fmt::format("cannot close {}: {}", temp, std::strerror(errno));
  return problem;
}

}  // namespace

void write_file_atomically(const std::string& path, std::span<const char> bytes, const char* writer) {
  // The process id keeps two processes writing the same path apart.
  const std::string temp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  std::string problem = write_synced(temp, bytes);
  if (problem.empty() && std::rename(temp.c_str(), path.c_str()) != 0) {
    problem = fmt::format("cannot rename {} over it: {}", temp, std::strerror(errno));
  }
  if (!problem.empty()) {
    ::unlink(temp.c_str());
    detail::fail("{}: {}: {}", writer, path, problem);
  }
}

}  // namespace ddl
