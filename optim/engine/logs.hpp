// Logs and History: the named numbers a training run reports ("loss",
// "accuracy", "val_loss", "lr", ...), kept in the order they were first set
// so printed lines, CSV columns and JSON objects read the same every epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ddl::optim {

class Logs {
 public:
  using Entry = std::pair<std::string, double>;

  // Sets `name` to `value`, appending it if new.
  void set(const std::string& name, double value);
  std::optional<double> get(const std::string& name) const;
  // The value of `name`; throws ddl::Error listing the names present if absent.
  double at(const std::string& name) const;
  bool contains(const std::string& name) const { return get(name).has_value(); }
  // The names, in order (for error messages naming what the logs hold).
  std::vector<std::string> names() const;

  const std::vector<Entry>& entries() const { return entries_; }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<Entry> entries_;
};

// What fit() returns: one Logs per epoch trained in this call, each holding
// "epoch" (1-based), the training metrics, the "val_" metrics when there is
// validation data, "lr", "time_s" and "samples_per_s".
struct History {
  std::vector<Logs> epochs;
  // The series of `name` over the epochs (NaN where an epoch lacks it).
  std::vector<double> series(const std::string& name) const;
};

}  // namespace ddl::optim
