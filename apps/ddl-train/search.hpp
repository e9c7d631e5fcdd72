// --search: hyper-parameter search as the third kind of parallelism. A grid
// of values for some of ddl-train's options ("lr=0.5,1;batch-size=64,128")
// is trained configuration by configuration by groups of ranks (main.cpp's
// run_search); this file reads the grid, writes each configuration's
// command line and formats the results.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ddl::apps {

// One configuration: a value for each searched option.
struct SearchPoint {
  std::vector<std::pair<std::string, std::string>> values;  // option name (no dashes), value
  std::string describe() const;                             // "lr=0.5 batch-size=64"
};

struct SearchGrid {
  std::vector<std::pair<std::string, std::vector<std::string>>> settings;
  // Every combination, the last option varying fastest.
  std::vector<SearchPoint> points() const;
};

// The options a search may vary: those that change a run's training, not
// where it reads or writes.
inline const std::vector<std::string> kSearchableOptions{
    "lr",          "batch-size", "batch-per-rank", "optimizer", "momentum",  "weight-decay", "warmup-epochs",
    "lr-schedule", "accumulate", "seed",           "epochs",    "allreduce", "bucket-mb",    "micro-batches"};

// "name=v1,v2;name=v3": throws UsageError naming what is wrong (an option
// that cannot be searched, one given twice, an empty value).
SearchGrid parse_search(const std::string& spec);

// The command line of one configuration: `original` (argv without the
// program) less --search, --group-size, --parallel, --quiet and the searched
// options, plus the configuration's values, --quiet, and --parallel data
// when its group has several ranks.
std::vector<std::string> search_arguments(const std::vector<std::string>& original, const SearchPoint& point,
                                          bool data_parallel);

// The table rank 0 prints: each configuration, its last epoch's `monitor`
// and seconds (`results` holds the pairs in point order), the best marked,
// and the search's wall time beside the sum of the configurations' times.
std::string format_search_table(const SearchGrid& grid, const std::vector<SearchPoint>& points,
                                const std::vector<double>& results, const std::string& monitor, double wall_seconds);

}  // namespace ddl::apps
