// gradcheck: compares the gradients autograd computes for a function of
// float32 tensors with central finite differences. Every differentiable op
// and layer is checked with it on random shapes, not one size.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <ddl/ddl.hpp>

namespace ddl::test {

using TensorFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// Why these defaults, for float32 inputs of magnitude O(1):
//
// The check differentiates L(x) = sum_j w_j f_j(x), with fixed random
// weights w_j in [-1, 1) so every output element matters, and forms
// (L(x + h e_i) - L(x - h e_i)) / (x_i^+ - x_i^-), with L summed in double
// from the float32 outputs and the denominator the step actually taken after
// x_i +- h was rounded to float32. Two errors remain:
//
// * Truncation, h^2/6 * |d^3 L / dx_i^3|. The inputs keep away from kinks
//   and poles (see test_data.hpp), so |f'''| stays below ~100: the steepest
//   case is 1/b for |b| >= 0.5 (6/b^4 <= 96), next log on [0.5, 2] (2/x^3 <=
//   16). At h = 1e-2 that is <= 1.6e-3, and <= 3e-4 for the rest.
// * Rounding. Each f_j carries a relative error of about c*u, u = 2^-24 =
//   6e-8, with c = 1-3 for elementwise ops and up to ~k for a k-term dot
//   product or softmax lane. Outputs that do not depend on x_i come out
//   bitwise equal in both evaluations and cancel exactly; the ones that do
//   (at most ~13 here, each |f| <= ~2) contribute at most
//   13 * c * u * |f| / h = 13 * 13 * 6e-8 * 2 / 1e-2 = 2e-3, and typically
//   1e-5 since errors of random sign add like a random walk.
//
// h = 1e-2 balances the two: the minimum of c*u/h + h^2*M/6 lies at
// h* = (3 c u / M)^(1/3), about 1e-2 for c*u ~ 1e-6 and M ~ 1 (h = 1e-3
// would cut truncation 100x but raise rounding 10x, to ~2e-2 worst case).
// With both errors below 2e-3, accepting |analytic - numeric| <=
// 1e-2 + 1e-2 * |numeric| passes a correct gradient with a 5x margin, while
// a wrong one (a missing factor, a broadcast dim not summed, a sign) is off
// by O(|gradient|) ~ 0.1-1 on this data.
struct GradcheckOptions {
  double step = 1e-2;
  double atol = 1e-2;
  double rtol = 1e-2;
  std::uint64_t weight_seed = 20240601;  // seeds the weights w_j
};

struct GradcheckResult {
  bool ok = true;
  std::string report;  // the worst element, analytic and numeric, on failure
  explicit operator bool() const { return ok; }
};
std::ostream& operator<<(std::ostream& os, const GradcheckResult& result);

// Checks d/dx sum(f(x) * w) for every element of every input. `inputs` are
// float32 tensors on any one device; gradcheck makes its own leaves from
// copies of them, so the caller's tensors are never modified. An input f
// does not use must get a zero (or undefined) gradient. Use as
// CHECK(gradcheck(f, {x, y})): doctest prints the report when it fails.
GradcheckResult gradcheck(const TensorFunction& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace ddl::test
