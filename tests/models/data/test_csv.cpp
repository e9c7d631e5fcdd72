// Numeric CSV reading (models/data/csv.cpp): values, header, delimiter, and
// errors that name the file, line and column.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <ddl/ddl.hpp>
#include <ddl/models/data/csv.hpp>

using namespace ddl;
using namespace ddl::models;

namespace {

// Writes `text` to a fresh temp file and removes it at scope exit.
struct TempCsv {
  std::string path;
  explicit TempCsv(const std::string& text) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("ddl_test_csv_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".csv"))
               .string();
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempCsv() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("read_csv reads a header and numeric rows into a float32 rows x cols tensor") {
  const TempCsv file("strain,stress,flag\r\n0, 0 ,1\r\n0.001,200.5,1\r\n\r\n-2.5e-3,+1e2,0\r\n");
  const CsvTable table = read_csv(file.path, {',', true});
  CHECK(table.columns == std::vector<std::string>{"strain", "stress", "flag"});
  CHECK(table.values.shape() == Shape{3, 3});
  CHECK(table.values.dtype() == DType::Float32);
  CHECK(table.values.to_vector<float>() ==
        std::vector<float>{0.0f, 0.0f, 1.0f, 0.001f, 200.5f, 1.0f, -2.5e-3f, 100.0f, 0.0f});
}

TEST_CASE("read_csv without a header reads every line as data, with any delimiter") {
  const TempCsv file("1;2\n3;4\n");
  const CsvTable table = read_csv(file.path, {';', false});
  CHECK(table.columns.empty());
  CHECK(table.values.shape() == Shape{2, 2});
  CHECK(table.values.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("read_csv of a header alone gives zero rows") {
  const TempCsv file("a,b\n");
  const CsvTable table = read_csv(file.path, {',', true});
  CHECK(table.values.shape() == Shape{0, 2});
}

TEST_CASE("read_csv names the file, line and column of a cell that is not a number") {
  const TempCsv file("a,b,c\n1,2,3\n4,x5,6\n");
  CHECK_THROWS_WITH_AS(read_csv(file.path, {',', true}),
                       doctest::Contains((file.path + ": line 3, column 2 (b): 'x5' is not a number").c_str()), Error);
  const TempCsv empty_cell("1,,3\n");
  CHECK_THROWS_WITH_AS(read_csv(empty_cell.path), doctest::Contains("line 1, column 2"), Error);
  const TempCsv trailing("1,2.5kg\n");
  CHECK_THROWS_WITH_AS(read_csv(trailing.path), doctest::Contains("'2.5kg' is not a number"), Error);
}

TEST_CASE("read_csv refuses NaN and infinity, which from_chars would read, naming the cell") {
  for (const std::string cell : {"nan", "NaN", "inf", "-infinity", "+inf"}) {
    CAPTURE(cell);
    const TempCsv file("1,2\n3," + cell + "\n");
    CHECK_THROWS_WITH_AS(read_csv(file.path),
                         doctest::Contains(("line 2, column 2: '" + cell + "' is not a finite number").c_str()), Error);
  }
}

TEST_CASE("read_csv names the line of a ragged row") {
  const TempCsv file("1,2,3\n4,5,6\n7,8\n");
  CHECK_THROWS_WITH_AS(read_csv(file.path),
                       doctest::Contains((file.path + ": line 3: 2 cells, but line 1 has 3").c_str()), Error);
}

TEST_CASE("read_csv names a missing file") {
  CHECK_THROWS_WITH_AS(read_csv("/nonexistent/ddl.csv"), doctest::Contains("/nonexistent/ddl.csv: no such file"),
                       Error);
}
