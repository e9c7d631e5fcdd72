// ProgressPrinter: the Trainer's Keras-like output. On a terminal a bar
// redrawn in place (batch k/N, ETA, running loss and metrics, samples/s);
// elsewhere plain lines a log file can hold: one per epoch, and a progress
// line every 10 seconds so long epochs show they are alive.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

#include <ddl/optim/engine/logs.hpp>

namespace ddl::optim {

enum class Verbosity {
  quiet,        // nothing
  epoch_lines,  // one line per epoch
  progress,     // a live progress bar on a terminal; elsewhere (a file, a
                // pipe, CI) one line per epoch plus a progress line every
                // 10 seconds
};

class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, Verbosity verbosity, bool terminal);

  void begin_epoch(std::int64_t epoch, std::int64_t epochs, std::int64_t batches);
  // After `done` of the epoch's batches, `samples` samples in all ranks.
  void update(std::int64_t done, double samples, const Logs& running);
  // `logs` as History records them (with time_s and samples_per_s).
  void end_epoch(const Logs& logs);

 private:
  using Clock = std::chrono::steady_clock;
  double seconds_since_begin() const;

  std::ostream& out_;
  Verbosity verbosity_;
  bool terminal_;
  std::int64_t epoch_ = 0, epochs_ = 0, batches_ = 0;
  Clock::time_point begin_, last_print_;
};

// "loss: 0.4321 - accuracy: 0.8456 - ...": the metrics of `logs`, without
// bookkeeping entries (epoch, lr, time, throughput).
std::string format_metrics(const Logs& logs);
// "1:05:09", "4:12", "37s".
std::string format_duration(double seconds);

}  // namespace ddl::optim
