// See curve_plot.hpp. The figure is drawn by gnuplot (Debian's gnuplot-nox,
// installed by scripts/install-deps.sh), fed a script with the data inline
// on its standard input; it writes a temporary file that is renamed over the
// PNG once complete.
#include "curve_plot.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ddl/core/check.hpp>

namespace ddl::apps {
namespace {

// Logs entries that are not curves of a metric.
bool is_metric(const std::string& name) {
  return name != "epoch" && name != "lr" && name != "time_s" && name != "samples_per_s" && name != "skipped_steps" &&
         !name.starts_with("val_");
}

// gnuplot's missing-value marker for an epoch without the metric.
std::string value_or_missing(const optim::Logs& logs, const std::string& name) {
  const auto value = logs.get(name);
  return value && std::isfinite(*value) ? fmt::format("{:.9g}", *value) : "NaN";
}

// `text` as a gnuplot string literal.
std::string quoted(const std::string& text) {
  std::string result = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') result += '\\';
    result += c;
  }
  return result + '"';
}

// The gnuplot script that draws `epochs` into `output`: one panel per
// metric, each with its data inline (epoch, training value, test value).
std::string gnuplot_script(const std::vector<optim::Logs>& epochs, const std::string& title,
                           const std::string& output) {
  std::vector<std::string> metrics;
  for (const optim::Logs& logs : epochs) {
    for (const auto& [name, value] : logs) {
      if (is_metric(name) && std::find(metrics.begin(), metrics.end(), name) == metrics.end()) metrics.push_back(name);
    }
  }
  const std::size_t panels = std::max<std::size_t>(metrics.size(), 1);
  std::string text = fmt::format(
      "set terminal pngcairo noenhanced size {},420 font \"sans,10\"\n"
      "set output {}\n"
      "set datafile missing \"NaN\"\n"
      "set grid\nset xlabel \"epoch\"\nset xtics 1\nset key box opaque\n"
      "set multiplot layout 1,{} title {}\n",
      panels * 560, quoted(output), panels, quoted(title));
  for (const std::string& metric : metrics) {
    text += fmt::format("$data_{} << EOD\n", metric);
    for (const optim::Logs& logs : epochs) {
      text += fmt::format("{} {} {}\n", value_or_missing(logs, "epoch"), value_or_missing(logs, metric),
                          value_or_missing(logs, "val_" + metric));
    }
    text += "EOD\n";
    const bool has_test = std::any_of(epochs.begin(), epochs.end(),
                                      [&](const optim::Logs& logs) { return logs.contains("val_" + metric); });
    // The legend where the curves are not: top right for a falling loss or
    // error, bottom right for a rising accuracy.
    const bool falls = metric == "loss" || metric == "mae";
    text += fmt::format("set key {}\n", falls ? "top right" : "bottom right");
    text +=
        fmt::format("set title \"{}\"\nplot $data_{} using 1:2 with linespoints lw 2 title \"train\"", metric, metric);
    text += has_test ? fmt::format(", $data_{} using 1:3 with linespoints lw 2 title \"test\"\n", metric) : "\n";
  }
  return text + "unset multiplot\n";
}

}  // namespace

bool gnuplot_available() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

CurvePlot::CurvePlot(std::string path, std::string title) : path_(std::move(path)), title_(std::move(title)) {}

void CurvePlot::on_epoch_end(optim::Trainer& /*trainer*/, std::int64_t /*epoch*/, const optim::Logs& logs) {
  epochs_.push_back(logs);
  draw();
}

void CurvePlot::draw() const {
  const std::string temp = fmt::format("{}.tmp.{}.png", path_, static_cast<long>(::getpid()));
  std::FILE* gnuplot = ::popen("gnuplot", "w");
  DDL_CHECK(gnuplot != nullptr, "--plot {}: cannot run gnuplot: {}", path_, std::strerror(errno));
  const std::string text = gnuplot_script(epochs_, title_, temp);
  const bool written = std::fwrite(text.data(), 1, text.size(), gnuplot) == text.size();
  const int status = ::pclose(gnuplot);
  const bool drawn = written && status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!drawn || std::rename(temp.c_str(), path_.c_str()) != 0) {
    ::unlink(temp.c_str());
    detail::fail("--plot {}: {}", path_,
                 drawn ? fmt::format("cannot rename {} over it: {}", temp, std::strerror(errno))
                       : fmt::format("gnuplot failed (status {}); its messages are above", status));
  }
}

void CurvePlot::save_state(optim::Checkpoint& checkpoint, const std::string& prefix) const {
  nlohmann::json epochs = nlohmann::json::array();
  for (const optim::Logs& logs : epochs_) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [name, value] : logs) entries.push_back({name, value});
    epochs.push_back(std::move(entries));
  }
  checkpoint.strings[prefix + "epochs"] = epochs.dump();
}

void CurvePlot::load_state(const optim::Checkpoint& checkpoint, const std::string& prefix) {
  epochs_.clear();
  const auto found = checkpoint.strings.find(prefix + "epochs");
  if (found == checkpoint.strings.end()) return;  // a checkpoint of a run without --plot
  try {
    for (const auto& entries : nlohmann::json::parse(found->second)) {
      optim::Logs logs;
      for (const auto& entry : entries) logs.set(entry.at(0).get<std::string>(), entry.at(1).get<double>());
      epochs_.push_back(std::move(logs));
    }
  } catch (const nlohmann::json::exception& error) {
    detail::fail("--plot: the checkpoint's curve data is malformed: {}", error.what());
  }
}

}  // namespace ddl::apps
