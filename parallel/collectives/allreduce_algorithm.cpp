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
    case AllreduceAlgorithm::hierarchical:
      return "hierarchical";
    case AllreduceAlgorithm::builtin:
      return "builtin";
    case AllreduceAlgorithm::automatic:
      return "auto";
  }
  return "unknown";
}

std::vector<AllreduceAlgorithm> all_allreduce_algorithms() {
  return {AllreduceAlgorithm::ring,   AllreduceAlgorithm::rhd, AllreduceAlgorithm::tree,
          AllreduceAlgorithm::naive,  AllreduceAlgorithm::shm, AllreduceAlgorithm::hierarchical,
          AllreduceAlgorithm::builtin};
}

std::vector<AllreduceAlgorithm> allreduce_choices() {
  std::vector<AllreduceAlgorithm> choices = all_allreduce_algorithms();
  choices.push_back(AllreduceAlgorithm::automatic);
  return choices;
}

bool runs_on_gpu(AllreduceAlgorithm algorithm) {
  return algorithm != AllreduceAlgorithm::shm && algorithm != AllreduceAlgorithm::hierarchical &&
         algorithm != AllreduceAlgorithm::automatic;
}

AllreduceAlgorithm parse_allreduce(const std::string& name) {
  return choice_by_name(name, allreduce_choices(), algorithm_name, "allreduce algorithm");
}

}  // namespace ddl::parallel
