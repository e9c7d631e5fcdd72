// ProgressPrinter (see progress.hpp).
#include <ddl/optim/engine/progress.hpp>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>

#include <fmt/format.h>


namespace ddl::optim {
namespace {

constexpr int kBarWidth = 30;
constexpr double kTerminalRedrawSeconds = 0.1;
constexpr double kPlainLineSeconds = 10.0;

bool is_bookkeeping(const std::string& name) {
  return name == "epoch" || name == "lr" || name == "time_s" || name == "samples_per_s";
}

std::string bar(std::int64_t done, std::int64_t total) {
  const auto filled = total > 0 ? static_cast<int>(kBarWidth * done / total) : kBarWidth;
  std::string text(static_cast<std::size_t>(kBarWidth), '.');
  for (int i = 0; i < filled; ++i) text[static_cast<std::size_t>(i)] = '=';
  if (filled < kBarWidth) text[static_cast<std::size_t>(filled)] = '>';
  return text;
}

}  // namespace

std::string format_metrics(const Logs& logs) {
  std::string text;
  for (const auto& [name, value] : logs) {
    if (is_bookkeeping(name)) continue;
    if (!text.empty()) text += " - ";
    text += fmt::format("{}: {:.4f}", name, value);
  }
  return text;
}

std::string format_duration(double seconds) {
  const auto total = static_cast<std::int64_t>(std::llround(std::max(seconds, 0.0)));
  if (total < 60) return fmt::format("{}s", total);
  if (total < 3600) return fmt::format("{}:{:02}", total / 60, total % 60);
  return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

ProgressPrinter::ProgressPrinter(std::ostream& out, Verbosity verbosity, bool terminal)
    : out_(out), verbosity_(verbosity), terminal_(terminal) {}

double ProgressPrinter::seconds_since_begin() const {
  return std::chrono::duration<double>(Clock::now() - begin_).count();
}

void ProgressPrinter::begin_epoch(std::int64_t epoch, std::int64_t epochs, std::int64_t batches) {
  epoch_ = epoch;
  epochs_ = epochs;
  batches_ = batches;
  begin_ = last_print_ = Clock::now();
  if (verbosity_ == Verbosity::progress && terminal_) out_ << fmt::format("Epoch {}/{}\n", epoch_ + 1, epochs_) << std::flush;
}

void ProgressPrinter::update(std::int64_t done, double samples, const Logs& running) {
  if (verbosity_ != Verbosity::progress) return;
  const auto now = Clock::now();
  const double since_print = std::chrono::duration<double>(now - last_print_).count();
  const bool last = done == batches_;
  if (since_print < (terminal_ ? kTerminalRedrawSeconds : kPlainLineSeconds) && !last) return;
  if (!terminal_ && last) return;  // the epoch line follows at once
  last_print_ = now;
  const double elapsed = seconds_since_begin();
  const double eta = done > 0 ? elapsed * static_cast<double>(batches_ - done) / static_cast<double>(done) : 0.0;
  const double rate = elapsed > 0.0 ? samples / elapsed : 0.0;
  const int width = static_cast<int>(std::to_string(batches_).size());
  const std::string metrics = format_metrics(running);
  if (terminal_) {
    out_ << fmt::format("\r{:>{}}/{} [{}] - ETA: {} - {} - {:.0f} samples/s\033[K", done, width, batches_,
                        bar(done, batches_), format_duration(eta), metrics, rate)
         << std::flush;
  } else {
    out_ << fmt::format("Epoch {}/{} - batch {}/{} - ETA: {} - {} - {:.0f} samples/s\n", epoch_ + 1, epochs_, done,
                        batches_, format_duration(eta), metrics, rate)
         << std::flush;
  }
}

void ProgressPrinter::end_epoch(const Logs& logs) {
  if (verbosity_ == Verbosity::quiet) return;
  const std::string timing = fmt::format("{} - {:.0f} samples/s", format_duration(logs.get("time_s").value_or(0.0)),
                                         logs.get("samples_per_s").value_or(0.0));
  if (verbosity_ == Verbosity::progress && terminal_) {
    const int width = static_cast<int>(std::to_string(batches_).size());
    out_ << fmt::format("\r{:>{}}/{} [{}] - {} - {}\033[K\n", batches_, width, batches_, bar(batches_, batches_),
                        timing, format_metrics(logs));
  } else {
    out_ << fmt::format("Epoch {}/{} - {} - {}\n", epoch_ + 1, epochs_, timing, format_metrics(logs));
  }
  out_ << std::flush;
}

}  // namespace ddl::optim
