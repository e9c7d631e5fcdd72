// gradcheck itself: it must pass a correct gradient and catch a wrong one,
// or every other gradient test proves nothing.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <sstream>

#include "support/gradcheck.hpp"

using namespace ddl;
using ddl::test::gradcheck;

namespace {

// x * x with a backward that forgets the factor 2.
Tensor square_with_wrong_gradient(const Tensor& x) {
  Tensor y;
  {
    const NoGradGuard no_grad;
    y = mul(x, x);
  }
  if (autograd::needs_grad({&x})) {
    autograd::record(std::make_shared<autograd::FunctionNode>(
                         "WrongSquareBackward", [x = x.detach()](const Tensor& g) { return std::vector{mul(g, x)}; }),
                     {&x}, y);
  }
  return y;
}

}  // namespace

TEST_CASE("gradcheck: passes a correct gradient") {
  Generator generator(1);
  const Tensor x = uniform({3, 5}, -1.0f, 1.0f, {}, &generator);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {x}));
}

TEST_CASE("gradcheck: rejects a wrong gradient and reports the worst element") {
  Generator generator(2);
  const Tensor x = uniform({3, 5}, 0.5f, 1.0f, {}, &generator);
  const auto result = gradcheck([](const std::vector<Tensor>& in) { return square_with_wrong_gradient(in[0]); }, {x});
  CHECK_FALSE(result.ok);
  std::ostringstream os;
  os << result;
  const std::string report = os.str();
  CHECK(report.find("analytic") != std::string::npos);
  CHECK(report.find("numeric") != std::string::npos);
  CHECK(report.find("[3, 5]") != std::string::npos);
  CHECK(report.find("of 15 gradient elements") != std::string::npos);
}

TEST_CASE("gradcheck: an input the function ignores must have a zero gradient") {
  Generator generator(3);
  const Tensor x = uniform({4}, -1.0f, 1.0f, {}, &generator);
  const Tensor unused = uniform({2}, -1.0f, 1.0f, {}, &generator);
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return exp(in[0]); }, {x, unused}));
}

TEST_CASE("gradcheck: leaves the caller's tensors untouched") {
  Generator generator(4);
  const Tensor x = uniform({5}, -1.0f, 1.0f, {}, &generator);
  const std::vector<float> before = x.to_vector<float>();
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return tanh(in[0]); }, {x}));
  CHECK(x.to_vector<float>() == before);
  CHECK_FALSE(x.grad().defined());
}
