// (placeholder until the stage_split branch lands)
#pragma once

#include <cstddef>

namespace ddl::parallel {

struct StageRange {
  std::size_t first = 0;
  std::size_t last = 0;
  bool operator==(const StageRange&) const = default;
  std::size_t size() const { return last - first + 1; }
};

}  // namespace ddl::parallel
