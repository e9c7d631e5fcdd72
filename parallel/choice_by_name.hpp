// Internal: an option chosen by name (an allreduce algorithm, a pipeline
// schedule, a stage balance), or a ddl::Error that lists the names there are.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ddl/core/error.hpp>

namespace ddl::parallel {

// The value among `values` whose name_of() is `name`; `what` says what is
// chosen ("allreduce algorithm").
template <class Values, class NameOf>
auto choice_by_name(std::string_view name, const Values& values, NameOf name_of, std::string_view what) {
  std::vector<std::string> known;
  for (const auto& value : values) {
    if (name_of(value) == name) return value;
    known.emplace_back(name_of(value));
  }
  throw Error(fmt::format("unknown {} '{}'; known: {}", what, name, fmt::join(known, ", ")));
}

}  // namespace ddl::parallel
