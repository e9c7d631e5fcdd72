// leading_index, and copy_by_name: every check first (names, then dtypes and shapes), the
// copies last, so an error leaves the targets untouched.
#include <ddl/core/check.hpp>
#include <ddl/layers/named_tensors.hpp>

#include <charconv>
#include <map>

namespace ddl::layers {
namespace {

// The tensors by name; a name given twice is an error, since which of the
// two should win is a guess.
std::map<std::string, const Tensor*> by_name(std::string_view context, const std::vector<NamedTensor>& named,
                                             std::string_view prefix, std::string_view what) {
  std::map<std::string, const Tensor*> result;
  for (const auto& [name, tensor] : named) {
    DDL_CHECK(result.emplace(name, &tensor).second, "{}: '{}{}' appears twice in {}", context, prefix, name, what);
  }
  return result;
}

std::string dtype_and_shape(const Tensor& tensor) { return fmt::format("{} {}", tensor.dtype(), tensor.shape()); }

}  // namespace

std::optional<std::int64_t> leading_index(std::string_view name) {
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::int64_t index = 0;
  const char* end = name.data() + dot;
  const auto [stop, error] = std::from_chars(name.data(), end, index);
  if (error != std::errc() || stop != end) return std::nullopt;
  return index;
}

UnmatchedNames copy_by_name(std::string_view context, const std::vector<NamedTensor>& targets,
                            const std::vector<NamedTensor>& sources, const CopyByNameOptions& options) {
  const std::string_view prefix = options.name_prefix;
  const auto source_of = by_name(context, sources, prefix, options.sources_name);
  const auto target_of = by_name(context, targets, prefix, "the targets");
  UnmatchedNames unmatched;
  for (const auto& [name, target] : targets) {
    DDL_CHECK(target.defined(), "{}: the target '{}{}' is undefined", context, prefix, name);
    const auto found = source_of.find(name);
    if (found == source_of.end()) {
      DDL_CHECK(!options.strict, "{}: '{}{}' is missing from {}", context, prefix, name, options.sources_name);
      unmatched.missing.push_back(name);
      continue;
    }
    const Tensor& source = *found->second;
    DDL_CHECK(source.defined(), "{}: '{}{}' is undefined in {}", context, prefix, name, options.sources_name);
    if (source.shape() != target.shape() || source.dtype() != target.dtype()) {
      const std::string layout = options.layout_of ? options.layout_of(name) : std::string();
      ::ddl::detail::fail("{}: '{}{}' is {} in {} but the target is {}{}{}", context, prefix, name,
                          dtype_and_shape(source), options.sources_name, dtype_and_shape(target),
                          layout.empty() ? "" : "; ", layout);
    }
  }
  for (const auto& [name, source] : sources) {
    if (target_of.count(name) == 1) continue;
    DDL_CHECK(!options.strict, "{}: unexpected '{}{}' in {} (no target of that name)", context, prefix, name,
              options.sources_name);
    unmatched.unexpected.push_back(name);
  }
  for (const auto& [name, target] : targets) {
    const auto found = source_of.find(name);
    if (found != source_of.end()) target.copy_from(*found->second);
  }
  return unmatched;
}

}  // namespace ddl::layers
