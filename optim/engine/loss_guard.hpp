// LossGuard: tells a step whose loss says training has gone wrong from a
// healthy one, before its update. A NaN or infinite loss is one; so is a
// loss that stays finite but has exploded (SGD at a learning rate of 1e30
// reaches 4e30 and trains on): more than `divergence_factor` times the
// larger of two medians, that of the first steps' losses (about an
// untrained model's, so a loss trained down to near zero never makes an
// ordinary batch look divergent) and that of the recent steps' (so a loss
// that starts high and falls is still followed). Medians, not means: one
// spiking batch moves neither. Which steps count is each rank's own; the
// Trainer agrees the verdict over the ranks.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ddl::optim {

class LossGuard {
 public:
  // The steps whose losses anchor the guard, and the recent ones it follows.
  static constexpr std::size_t kFirstSteps = 8;
  static constexpr std::size_t kRecentSteps = 64;

  // divergence_factor: 0 watches for non-finite losses only.
  explicit LossGuard(double divergence_factor);

  // Why `loss` is not a healthy step's ("the loss is nan", "the loss is
  // 4e+30 (2e+30 times its usual 2.3, ...)"), or nothing, when it joins
  // the medians.
  std::optional<std::string> check(double loss);

  double divergence_factor() const { return factor_; }

 private:
  double factor_;
  std::vector<double> first_;
  std::vector<double> recent_;  // a ring of the last kRecentSteps
  std::size_t next_ = 0;
};

}  // namespace ddl::optim
