// Logs and History (see logs.hpp).
#include <ddl/optim/engine/logs.hpp>

#include <algorithm>
#include <limits>

#include <ddl/core/check.hpp>

namespace ddl::optim {

void Logs::set(const std::string& name, double value) {
  const auto found = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.first == name; });
  if (found != entries_.end()) {
    found->second = value;
  } else {
    entries_.emplace_back(name, value);
  }
}

std::optional<double> Logs::get(const std::string& name) const {
  for (const auto& [key, value] : entries_) {
    if (key == name) return value;
  }
  return std::nullopt;
}

std::vector<std::string> Logs::names() const {
  std::vector<std::string> names;
  for (const auto& entry : entries_) names.push_back(entry.first);
  return names;
}

double Logs::at(const std::string& name) const {
  if (const auto value = get(name)) return *value;
  throw Error(fmt::format("no metric named '{}' in the logs; they hold: {}", name, fmt::join(names(), ", ")));
}

std::vector<double> History::series(const std::string& name) const {
  std::vector<double> values;
  values.reserve(epochs.size());
  for (const auto& logs : epochs) values.push_back(logs.get(name).value_or(std::numeric_limits<double>::quiet_NaN()));
  return values;
}

}  // namespace ddl::optim
