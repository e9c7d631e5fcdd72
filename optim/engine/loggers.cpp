// FileLogger, CsvLogger and JsonLinesLogger (see loggers.hpp).
#include <ddl/optim/engine/loggers.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <ddl/core/check.hpp>

namespace ddl::optim {
namespace {

// The header row of an existing CSV file, empty if there is none.
std::vector<std::string> existing_columns(const std::string& path) {
  std::ifstream file(path);
  std::string header;
  if (!file || !std::getline(file, header) || header.empty()) return {};
  std::vector<std::string> columns;
  std::stringstream cells(header);
  for (std::string cell; std::getline(cells, cell, ',');) columns.push_back(cell);
  return columns;
}

}  // namespace

FileLogger::FileLogger(std::string path, bool append, const char* who)
    : path_(std::move(path)), append_(append), who_(who) {
  DDL_CHECK(!path_.empty(), "{}: the path is empty", who_);
}

FileLogger::~FileLogger() { close(); }

void FileLogger::open() {
  if (file_.is_open()) return;
  // The lock comes before truncating: a file another run is writing must
  // not lose its lines. flock's lock belongs to this descriptor alone, so
  // the stream's own open and close leave it be.
  lock_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  DDL_CHECK(lock_ >= 0, "{}: cannot open '{}' for writing: {}", who_, path_, std::strerror(errno));
  if (::flock(lock_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    ::close(lock_);
    lock_ = -1;
    DDL_CHECK(error != EWOULDBLOCK, "{}: '{}' is being written by another process (it holds the file's lock): two "
              "runs sharing one log would interleave their lines; give each run its own file", who_, path_);
    throw Error(fmt::format("{}: cannot lock '{}': {}", who_, path_, std::strerror(error)));
  }
  file_.open(path_, append_ ? std::ios::app : std::ios::trunc);
  DDL_CHECK(file_.is_open(), "{}: cannot open '{}' for writing: {}", who_, path_, std::strerror(errno));
}

void FileLogger::close() {
  if (file_.is_open()) file_.close();
  if (lock_ >= 0) ::close(lock_);  // releases the lock
  lock_ = -1;
}

void FileLogger::on_train_begin(Trainer& /*trainer*/) { open(); }

void FileLogger::on_train_end(Trainer& /*trainer*/) { close(); }

void FileLogger::write_line(const std::string& line) {
  file_ << line << '\n' << std::flush;
  DDL_CHECK(file_.good(), "{}: writing '{}' failed: {}", who_, path_, std::strerror(errno));
}

CsvLogger::CsvLogger(std::string path, bool append) : FileLogger(std::move(path), append, "CsvLogger") {}

void CsvLogger::on_train_begin(Trainer& trainer) {
  columns_ = append() ? existing_columns(path()) : std::vector<std::string>{};
  FileLogger::on_train_begin(trainer);
}

void CsvLogger::on_epoch_end(Trainer& /*trainer*/, std::int64_t /*epoch*/, const Logs& logs) {
  if (columns_.empty()) {
    for (const auto& entry : logs) columns_.push_back(entry.first);
    write_line(fmt::format("{}", fmt::join(columns_, ",")));
  }
  std::vector<std::string> cells;
  for (const auto& column : columns_) {
    const auto value = logs.get(column);
    cells.push_back(value ? fmt::format("{:.9g}", *value) : std::string());
  }
  write_line(fmt::format("{}", fmt::join(cells, ",")));
}

JsonLinesLogger::JsonLinesLogger(std::string path, bool append)
    : FileLogger(std::move(path), append, "JsonLinesLogger") {}

void JsonLinesLogger::on_epoch_end(Trainer& /*trainer*/, std::int64_t /*epoch*/, const Logs& logs) {
  nlohmann::ordered_json line;
  for (const auto& [name, value] : logs) {
    if (name == "epoch") {
      line[name] = static_cast<std::int64_t>(value);
    } else {
      line[name] = value;
    }
  }
  write_line(line.dump());
}

}  // namespace ddl::optim
