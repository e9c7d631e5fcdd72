// See allreduce_algorithm.hpp.
#include <ddl/parallel/collectives/allreduce_algorithm.hpp>

#include <ddl/parallel/choice_by_name.hpp>

namespace ddl::parallel {

std::string algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::ring:
      return "ring";
    case AllreduceAlgorithm::rhd:
      return "rhd";
    case AllreduceAlgorithm::tree:
      return "tree";
    case AllreduceAlgorithm::naive:
      return "naive";
    case AllreduceAlgorithm::shm:
      return "shm";
    case AllreduceAlgorithm::builtin:
      return "builtin";
  }
  return "unknown";
}

std::vector<AllreduceAlgorithm> all_allreduce_algorithms() {
  return {AllreduceAlgorithm::ring,  AllreduceAlgorithm::rhd, AllreduceAlgorithm::tree,
          AllreduceAlgorithm::naive, AllreduceAlgorithm::shm, AllreduceAlgorithm::builtin};
}

AllreduceAlgorithm parse_allreduce(const std::string& name) {
  return choice_by_name(name, all_allreduce_algorithms(), algorithm_name, "allreduce algorithm");
}

}  // namespace ddl::parallel
