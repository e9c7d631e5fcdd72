// ddl-train's command line (apps/ddl-train/options.cpp): the input is its
// arguments, one per line. CLI11 parses them into TrainOptions, then
// resolve_defaults checks what CLI11 cannot. A bad command line is a
// CLI::ParseError or a UsageError (exit 2, one line); anything else
// escaping is a bug. Options that pass have the defaults filled in.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "options.hpp"
#include "support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ddl;
  std::vector<std::string> arguments{"ddl-train"};
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const auto newline = rest.find('\n');
    arguments.emplace_back(rest.substr(0, newline));
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
  }
  std::vector<const char*> argv;
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());

  CLI::App app{"", "ddl-train"};
  apps::TrainOptions options;
  apps::add_options(app, options);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    apps::resolve_defaults(options);
  } catch (const CLI::ParseError&) {
    return 0;
  } catch (const apps::UsageError&) {
    return 0;
  }
  fuzz::require(options.lr && std::isfinite(*options.lr) && *options.lr > 0, "resolve_defaults: a positive --lr");
  fuzz::require(options.batch_size > 0 || options.batch_per_rank > 0, "resolve_defaults: a batch size");
  fuzz::require(!options.optimizer.empty() && !options.data_dir.empty(), "resolve_defaults: optimizer and data");
  fuzz::require(!apps::shared_settings(app).empty(), "shared_settings lists the options");
  return 0;
}
