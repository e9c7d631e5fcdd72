// Loggers: every epoch's logs appended to a file as they happen (Keras'
// CSVLogger), as CSV for spreadsheets and plots or as JSON lines for
// scripts. Each line is flushed when written, so a crash loses no epoch that
// finished. They run on the root rank only.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <ddl/optim/callback.hpp>

namespace ddl::optim {

// Columns: the names of the first epoch's logs ("epoch", "loss", ...). With
// append, an existing non-empty file keeps its rows and header (a resumed
// run continues its log); otherwise the file is replaced.
class CsvLogger : public Callback {
 public:
  explicit CsvLogger(std::string path, bool append = false);
  void on_train_begin(Trainer& trainer) override;
  void on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) override;
  void on_train_end(Trainer& trainer) override;
  bool root_only() const override { return true; }

 private:
  std::string path_;
  bool append_;
  std::ofstream file_;
  std::vector<std::string> columns_;
};

// One JSON object per epoch per line: {"epoch": 1, "loss": 0.52, ...}.
class JsonLinesLogger : public Callback {
 public:
  explicit JsonLinesLogger(std::string path, bool append = false);
  void on_train_begin(Trainer& trainer) override;
  void on_epoch_end(Trainer& trainer, std::int64_t epoch, const Logs& logs) override;
  void on_train_end(Trainer& trainer) override;
  bool root_only() const override { return true; }

 private:
  std::string path_;
  bool append_;
  std::ofstream file_;
};

}  // namespace ddl::optim
