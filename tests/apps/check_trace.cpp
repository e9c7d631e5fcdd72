// check_trace FILE RANKS [SPAN ...]: the command-line tests' check of a
// timeline file that ddl-train wrote (support/trace_checks.hpp), plus the
// spans every rank must have. Prints each problem and exits 1, or one "ok"
// line and exits 0.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "support/trace_checks.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: check_trace FILE RANKS [SPAN ...]\n";
    return 2;
  }
  const std::string path = argv[1];
  const int ranks = std::stoi(argv[2]);
  std::ifstream file(path);
  if (!file) {
    std::cout << "FAIL: cannot open " << path << '\n';
    return 1;
  }
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& error) {
    std::cout << "FAIL: " << path << " is not JSON: " << error.what() << '\n';
    return 1;
  }
  std::vector<std::string> problems = ddl::test::trace_problems(trace, ranks);
  if (problems.empty()) {
    for (int rank = 0; rank < ranks; ++rank) {
      const std::vector<std::string> names = ddl::test::span_names(trace, rank);
      for (int i = 3; i < argc; ++i) {
        if (std::find(names.begin(), names.end(), argv[i]) == names.end()) {
          problems.push_back(fmt::format("rank {} has no span '{}'", rank, argv[i]));
        }
      }
    }
  }
  for (const std::string& problem : problems) std::cout << "FAIL: " << path << ": " << problem << '\n';
  if (!problems.empty()) return 1;
  std::cout << fmt::format("ok: {}: {} events, {} ranks, spans nested, allreduces aligned\n", path,
                           trace.at("traceEvents").size(), ranks);
  return 0;
}
