// Loggers: every epoch's logs appended to a file as they happen (Keras'
// CSVLogger), as CSV for spreadsheets and plots or as JSON lines for
// scripts. Each line is flushed when written, so a crash loses no epoch that
// finished. They run on the root rank only.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <ddl/optim/engine/callback.hpp>

namespace ddl::optim {

// What both loggers share: the file, opened when training begins (appended
// to, or replaced), one flushed line per epoch, closed when training ends.
// While open, the file is locked (flock): a second logger on it, in this
// process or another, is refused instead of interleaving its lines.
class FileLogger : public Callback {
 public:
  ~FileLogger() override;
  FileLogger(const FileLogger&) = delete;
  FileLogger& operator=(const FileLogger&) = delete;

  // Opens and locks the file now (training does it otherwise), so that a
  // problem shows before training; throws ddl::Error naming the file.
  void open();
  void on_train_begin(Trainer& trainer) override;
  void on_train_end(Trainer& trainer) override;
  bool root_only() const override { return true; }

 protected:
  FileLogger(std::string path, bool append, const char* who);
  // Writes `line` and a newline, flushed; throws ddl::Error naming the file.
  void write_line(const std::string& line);
  const std::string& path() const { return path_; }
  bool append() const { return append_; }

 private:
  std::string path_;
  bool append_;
  void close();

  const char* who_;
  std::ofstream file_;
  int lock_ = -1;  // the descriptor holding the lock
};

// Columns: the names of the first epoch's logs ("epoch", "loss", ...). With
// append, an existing non-empty file keeps its rows and header (a resumed
// run continues its log; columns the header lacks are not written);
// otherwise the file is replaced.
class CsvLogger : public FileLogger {
 public:
  explicit CsvLogger(std::string path, bool append = false);
  void on_train_begin(Trainer& trainer) override;
  void on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) override;

 private:
  std::vector<std::string> columns_;
};

// One JSON object per epoch per line: {"epoch": 1, "loss": 0.52, ...}.
class JsonLinesLogger : public FileLogger {
 public:
  explicit JsonLinesLogger(std::string path, bool append = false);
  void on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) override;
};

}  // namespace ddl::optim
