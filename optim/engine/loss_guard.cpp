#include <ddl/optim/engine/loss_guard.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include <ddl/core/error.hpp>

namespace ddl::optim {
namespace {

double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

LossGuard::LossGuard(double divergence_factor) : factor_(divergence_factor) {
  DDL_CHECK(std::isfinite(divergence_factor) && (divergence_factor == 0.0 || divergence_factor > 1.0),
            "LossGuard: divergence_factor = {} is invalid (0 turns the check off, else it must be above 1)",
            divergence_factor);
}

std::optional<std::string> LossGuard::check(double loss) {
  if (!std::isfinite(loss)) return fmt::format("the loss is {}", loss);
  if (factor_ > 0.0 && !first_.empty()) {
    // A reference of 0 (a loss fitted exactly) makes any loss a multiple.
    const double reference = std::max(median(first_), median(recent_));
    if (reference > 0.0 && loss > factor_ * reference) {
      return fmt::format("the loss is {:.4g} ({:.3g} times its usual {:.4g}, past the divergence factor {:g})", loss,
                         loss / reference, reference, factor_);
    }
  }
  if (first_.size() < kFirstSteps) first_.push_back(loss);
  if (recent_.size() < kRecentSteps) {
    recent_.push_back(loss);
  } else {
    recent_[next_] = loss;
    next_ = (next_ + 1) % kRecentSteps;
  }
  return std::nullopt;
}

}  // namespace ddl::optim
