// See search.hpp.
#include "search.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ddl/optim/engine/callbacks.hpp>

#include "options.hpp"

namespace ddl::apps {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

// Whether `argument` is `--name` or `--name=...`.
bool names(const std::string& argument, const std::string& name) {
  return argument == "--" + name || argument.starts_with("--" + name + "=");
}

}  // namespace

std::string SearchPoint::describe() const {
  std::vector<std::string> parts;
  for (const auto& [name, value] : values) parts.push_back(name + "=" + value);
  return fmt::format("{}", fmt::join(parts, " "));
}

std::vector<SearchPoint> SearchGrid::points() const {
  std::vector<SearchPoint> points{SearchPoint{}};
  for (const auto& [name, values] : settings) {
    std::vector<SearchPoint> next;
    for (const SearchPoint& point : points) {
      for (const std::string& value : values) {
        next.push_back(point);
        next.back().values.emplace_back(name, value);
      }
    }
    points = std::move(next);
  }
  return points;
}

SearchGrid parse_search(const std::string& spec) {
  SearchGrid grid;
  for (const std::string& setting : split(spec, ';')) {
    const auto equals = setting.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw UsageError(fmt::format("--search '{}': '{}' is not name=value,value,...", spec, setting));
    }
    const std::string name = setting.substr(0, equals);
    if (std::find(kSearchableOptions.begin(), kSearchableOptions.end(), name) == kSearchableOptions.end()) {
      throw UsageError(fmt::format("--search: '{}' cannot be searched; the options that can: {}", name,
                                   fmt::join(kSearchableOptions, ", ")));
    }
    for (const auto& [taken, values] : grid.settings) {
      if (taken == name) throw UsageError(fmt::format("--search: '{}' is given twice", name));
    }
    const std::vector<std::string> values = split(setting.substr(equals + 1), ',');
    if (values.empty() || std::any_of(values.begin(), values.end(), [](const auto& v) { return v.empty(); })) {
      throw UsageError(fmt::format("--search: '{}' has an empty value", setting));
    }
    grid.settings.emplace_back(name, values);
  }
  if (grid.settings.empty()) throw UsageError("--search: no option to search");
  return grid;
}

std::vector<std::string> search_arguments(const std::vector<std::string>& original, const SearchPoint& point,
                                          bool data_parallel) {
  std::vector<std::string> dropped{"search", "group-size", "parallel"};
  for (const auto& [name, value] : point.values) dropped.push_back(name);
  std::vector<std::string> arguments;
  for (std::size_t i = 0; i < original.size(); ++i) {
    const std::string& argument = original[i];
    if (argument == "--quiet" || argument == "-q") continue;
    const auto option =
        std::find_if(dropped.begin(), dropped.end(), [&](const auto& name) { return names(argument, name); });
    if (option != dropped.end()) {
      if (argument.find('=') == std::string::npos) ++i;  // its value is the next argument
      continue;
    }
    arguments.push_back(argument);
  }
  for (const auto& [name, value] : point.values) {
    arguments.push_back("--" + name);
    arguments.push_back(value);
  }
  arguments.push_back("--quiet");
  if (data_parallel) arguments.insert(arguments.end(), {"--parallel", "data"});
  return arguments;
}

std::string format_search_table(const SearchGrid& grid, const std::vector<SearchPoint>& points,
                                const std::vector<double>& results, const std::string& monitor, double wall_seconds) {
  const optim::Monitor better(monitor, optim::MonitorMode::automatic);
  std::optional<double> best;
  std::size_t best_index = 0;
  double total = 0.0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (better.improves(results[2 * i], best)) {
      best = results[2 * i];
      best_index = i;
    }
    total += results[2 * i + 1];
  }
  std::string table = "\n";
  for (const auto& [name, values] : grid.settings) table += fmt::format("{:>14} ", name);
  table += fmt::format("{:>14} {:>10}\n", monitor, "seconds");
  for (std::size_t i = 0; i < points.size(); ++i) {
    for (const auto& [name, value] : points[i].values) table += fmt::format("{:>14} ", value);
    table += fmt::format("{:>14.4f} {:>10.1f}{}\n", results[2 * i], results[2 * i + 1], i == best_index ? "  *" : "");
  }
  table += fmt::format("best: {} ({} {:.4f})\n", points[best_index].describe(), monitor, results[2 * best_index]);
  table += fmt::format("the search took {:.1f} s; its {} configurations' own times add up to {:.1f} s\n", wall_seconds,
                       points.size(), total);
  return table;
}

}  // namespace ddl::apps
