// parallel::parse_split on any text: the first byte gives the layer count
// (0-63: a refused split's message computes the even split, O(stages x
// layers^2), so larger counts only slow the search), the second the stage
// count (signed, so 0 and negatives are tried), the rest is the text. The
// stages it returns are contiguous, non-empty, cover every layer, and their
// split points written back parse to the same stages.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <ddl/parallel/strategies/pipeline/stage_split.hpp>

#include "support.hpp"

namespace {

std::string points_text(const std::vector<ddl::parallel::StageRange>& stages) {
  std::string text;
  for (std::size_t s = 1; s < stages.size(); ++s) text += (s > 1 ? "," : "") + std::to_string(stages[s].first);
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddl;
  if (size < 2) return 0;
  const std::size_t layers = data[0] % 64;
  const int stages = static_cast<std::int8_t>(data[1]);
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  std::vector<parallel::StageRange> split;
  if (!fuzz::parses([&] { split = parallel::parse_split(text, layers, stages); })) return 0;

  fuzz::require(split.size() == static_cast<std::size_t>(stages), "parse_split: one range per stage");
  std::size_t next = 0;
  for (const parallel::StageRange& stage : split) {
    fuzz::require(stage.first == next && stage.first <= stage.last, "parse_split: contiguous, non-empty stages");
    next = stage.last + 1;
  }
  fuzz::require(next == layers, "parse_split: every layer in a stage");
  fuzz::require(parallel::parse_split(points_text(split), layers, stages) == split, "parse_split(points(s)) == s");
  return 0;
}
