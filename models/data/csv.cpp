// Numeric CSV reading: one pass over the lines, cells parsed with
// std::from_chars (locale-independent, exact round trip of printed floats).
#include <ddl/models/data/csv.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <ddl/core/check.hpp>

namespace ddl::models {
namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

std::vector<std::string_view> split(std::string_view line, char delimiter) {
  std::vector<std::string_view> cells;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find(delimiter, start);
    cells.push_back(trim(line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return cells;
}

std::string unquote(std::string_view name) {
  if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
  return std::string(name);
}

}  // namespace

CsvTable read_csv(const std::string& path, const CsvOptions& options) {
  std::error_code error;
  DDL_CHECK(std::filesystem::is_regular_file(path, error), "read_csv: {}: no such file", path);
  std::ifstream in(path, std::ios::binary);
  DDL_CHECK(in.good(), "read_csv: {}: cannot open", path);

  CsvTable table;
  std::vector<float> values;
  std::int64_t cols = -1;
  std::int64_t first_row_line = 0;
  bool header_pending = options.header;
  std::string line;
  for (std::int64_t line_number = 1; std::getline(in, line); ++line_number) {
    if (trim(line).empty()) continue;
    const std::vector<std::string_view> cells = split(line, options.delimiter);
    const auto count = static_cast<std::int64_t>(cells.size());
    if (cols < 0) {
      cols = count;
      first_row_line = line_number;
    } else {
      DDL_CHECK(count == cols, "read_csv: {}: line {}: {} cells, but line {} has {}", path, line_number, count,
                first_row_line, cols);
    }
    if (header_pending) {
      header_pending = false;
      for (const std::string_view cell : cells) table.columns.push_back(unquote(cell));
      continue;
    }
    for (std::int64_t c = 0; c < count; ++c) {
      const std::string_view cell = cells[static_cast<std::size_t>(c)];
      float value = 0.0f;
      // from_chars does not take a leading '+'; accept it as people write it.
      const std::string_view digits = cell.size() > 1 && cell.front() == '+' ? cell.substr(1) : cell;
      const auto [end, status] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      const bool ok = !digits.empty() && status != std::errc::invalid_argument && end == digits.data() + digits.size();
      DDL_CHECK(ok, "read_csv: {}: line {}, column {}{}: '{}' is not a number", path, line_number, c + 1,
                table.columns.empty() ? "" : " (" + table.columns[static_cast<std::size_t>(c)] + ")", cell);
      // Out of float range: from_chars reports result_out_of_range.
      DDL_CHECK(status != std::errc::result_out_of_range,
                "read_csv: {}: line {}, column {}: '{}' is out of float32 range", path, line_number, c + 1, cell);
      // from_chars reads "nan" and "inf" too; a value of training data that
      // is not finite would only show up later as a non-finite loss.
      DDL_CHECK(std::isfinite(value), "read_csv: {}: line {}, column {}: '{}' is not a finite number", path,
                line_number, c + 1, cell);
      values.push_back(value);
    }
  }
  DDL_CHECK(!in.bad(), "read_csv: {}: read error", path);
  const std::int64_t columns = std::max<std::int64_t>(cols, 0);
  const std::int64_t rows = columns == 0 ? 0 : static_cast<std::int64_t>(values.size()) / columns;
  table.values = Tensor::empty(Shape{rows, columns});
  std::copy(values.begin(), values.end(), table.values.data<float>());
  return table;
}

}  // namespace ddl::models
