// Numeric CSV files for tabular data: every cell a number, an optional
// header row of column names, a chosen delimiter. No quoting inside data
// rows: numeric tables do not need it.
#pragma once

#include <string>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::models {

struct CsvOptions {
  char delimiter = ',';
  bool header = false;  // the first non-empty line names the columns
};

struct CsvTable {
  std::vector<std::string> columns;  // the header's names (empty without a header)
  Tensor values;                     // float32 [rows, cols], CPU
};

// Reads a numeric CSV. Cells may have spaces around them; lines may end in
// \r\n; empty lines are skipped. Throws ddl::Error naming the file, the line
// (1-based, as an editor counts) and the column (1-based) for a cell that is
// not a number, and the line for a row whose cell count differs from the
// first row's.
CsvTable read_csv(const std::string& path, const CsvOptions& options = {});

}  // namespace ddl::models
