#include <ddl/core/entry_points.hpp>

#include <mutex>
#include <set>
#include <utility>

namespace ddl::backend {
namespace {

struct Registry {
  std::mutex mutex;
  std::set<std::pair<std::string, Device>> run;
};

// Never destroyed: a static tensor's last op may run after it would be.
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

void note_entry_point(const char* op, const Device& device) {
  Registry& r = registry();
  std::pair<std::string, Device> entry(op, device);  // made outside the lock
  const std::lock_guard lock(r.mutex);
  r.run.insert(std::move(entry));
}

std::vector<std::string> entry_points_run(const Device& device) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [op, on] : r.run)
    if (on == device) names.push_back(op);
  return names;
}

}  // namespace ddl::backend
