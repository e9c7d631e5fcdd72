// CsvLogger and JsonLinesLogger (see loggers.hpp).
#include <ddl/optim/loggers.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <ddl/core/check.hpp>

namespace ddl::optim {
namespace {

std::ofstream open_log(const std::string& path, bool append, const char* who) {
  std::ofstream file(path, append ? std::ios::app : std::ios::trunc);
  DDL_CHECK(file.is_open(), "{}: cannot open '{}' for writing: {}", who, path, std::strerror(errno));
  return file;
}

void write_line(std::ofstream& file, const std::string& line, const std::string& path, const char* who) {
  file << line << '\n' << std::flush;
  DDL_CHECK(file.good(), "{}: writing '{}' failed: {}", who, path, std::strerror(errno));
}

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

CsvLogger::CsvLogger(std::string path, bool append) : path_(std::move(path)), append_(append) {
  DDL_CHECK(!path_.empty(), "CsvLogger: the path is empty");
}

void CsvLogger::on_train_begin(Trainer& /*trainer*/) {
  columns_ = append_ ? existing_columns(path_) : std::vector<std::string>{};
  file_ = open_log(path_, append_, "CsvLogger");
}

void CsvLogger::on_epoch_end(Trainer& /*trainer*/, std::int64_t /*epoch*/, const Logs& logs) {
  if (columns_.empty()) {
    for (const auto& entry : logs) columns_.push_back(entry.first);
    write_line(file_, fmt::format("{}", fmt::join(columns_, ",")), path_, "CsvLogger");
  }
  std::vector<std::string> cells;
  for (const auto& column : columns_) {
    const auto value = logs.get(column);
    cells.push_back(value ? fmt::format("{:.9g}", *value) : std::string());
  }
  write_line(file_, fmt::format("{}", fmt::join(cells, ",")), path_, "CsvLogger");
}

void CsvLogger::on_train_end(Trainer& /*trainer*/) { file_.close(); }

JsonLinesLogger::JsonLinesLogger(std::string path, bool append) : path_(std::move(path)), append_(append) {
  DDL_CHECK(!path_.empty(), "JsonLinesLogger: the path is empty");
}

void JsonLinesLogger::on_train_begin(Trainer& /*trainer*/) { file_ = open_log(path_, append_, "JsonLinesLogger"); }

void JsonLinesLogger::on_epoch_end(Trainer& /*trainer*/, std::int64_t /*epoch*/, const Logs& logs) {
  nlohmann::ordered_json line;
  for (const auto& [name, value] : logs) {
    if (name == "epoch") {
      line[name] = static_cast<std::int64_t>(value);
    } else {
      line[name] = value;
    }
  }
  write_line(file_, line.dump(), path_, "JsonLinesLogger");
}

void JsonLinesLogger::on_train_end(Trainer& /*trainer*/) { file_.close(); }

}  // namespace ddl::optim
