// Start-up agreement under mpiexec (see start_up.hpp).
#include "start_up.hpp"

#include <fmt/format.h>

#include <ddl/parallel/communication/agreement.hpp>

#include "options.hpp"

namespace ddl::apps {

void agree_start_up(const parallel::Communicator& world, const std::string& problem, bool usage) {
  const std::vector<parallel::RankProblem> problems = parallel::gather_problems(world, problem);
  if (problems.empty()) return;
  std::vector<double> usage_errors{!problem.empty() && usage ? 1.0 : 0.0};
  world.sum_doubles(usage_errors);
  // One rank failing alone reads as that rank's own error, with its rank.
  throw AgreedError(fmt::format("{} could not start: {}", problems.size() == 1 ? "a rank" : "ranks",
                                parallel::describe_problems(problems)),
                    usage_errors[0] > 0.0 ? 2 : 1, world.rank() == 0);
}

void agree_settings(const parallel::Communicator& world, const std::vector<std::string>& settings) {
  const auto disagreement = parallel::first_disagreement(world, settings);
  if (!disagreement) return;
  std::string values;
  for (std::size_t r = 0; r < disagreement->per_rank.size(); ++r) {
    values += fmt::format("{}rank {} has '{}'", r == 0 ? "" : ", ", r, disagreement->per_rank[r]);
  }
  throw AgreedError(fmt::format("the ranks were started with different settings: {}; every rank must train with "
                                "the same options and data (these may differ: {})",
                                values, fmt::join(kPerRankOptions, " ")),
                    2, world.rank() == 0);
}

}  // namespace ddl::apps
