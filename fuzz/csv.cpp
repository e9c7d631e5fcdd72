// models::read_csv on any bytes: the first byte picks the options (the
// delimiter and whether a header comes first), the rest is the file. It
// returns a [rows, cols] table or throws ddl::Error. The values it returns,
// printed in fmt's shortest exact form, read back bit for bit.
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include <ddl/models/data/csv.hpp>

#include "support.hpp"

namespace {

// Bit for bit, so -0 differs from 0 (read_csv refuses NaN, which has no
// one bit pattern).
bool same_value(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::string print_csv(const ddl::Tensor& values, char delimiter) {
  std::string text;
  const float* v = values.data<float>();
  for (std::int64_t r = 0; r < values.size(0); ++r) {
    for (std::int64_t c = 0; c < values.size(1); ++c) {
      if (c > 0) text += delimiter;
      text += fmt::format("{}", v[r * values.size(1) + c]);
    }
    text += '\n';
  }
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddl;
  if (size == 0) return 0;
  static const fuzz::TempFile input(".csv");
  static const fuzz::TempFile reprinted(".reprinted.csv");
  constexpr std::array<char, 4> kDelimiters{',', ';', '\t', '|'};
  const models::CsvOptions options{.delimiter = kDelimiters[data[0] % kDelimiters.size()],
                                   .header = (data[0] & 0x80) != 0};
  models::CsvTable table;
  if (!fuzz::parses([&] { table = models::read_csv(input.write({data + 1, size - 1}), options); })) return 0;

  fuzz::require(table.values.dim() == 2, "read_csv: a [rows, cols] table");
  fuzz::require(table.columns.empty() || static_cast<std::int64_t>(table.columns.size()) == table.values.size(1),
                "read_csv: one name per column");
  if (table.values.numel() == 0) return 0;
  const std::string text = print_csv(table.values, options.delimiter);
  const models::CsvTable again =
      models::read_csv(reprinted.write({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}),
                       {.delimiter = options.delimiter});
  fuzz::require(again.values.shape() == table.values.shape(), "read_csv(print(t)) has t's shape");
  const float* a = table.values.data<float>();
  const float* b = again.values.data<float>();
  for (std::int64_t i = 0; i < table.values.numel(); ++i)
    fuzz::require(same_value(a[i], b[i]), "read_csv(print(t)) == t");
  return 0;
}
