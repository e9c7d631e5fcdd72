#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

TEST_CASE("smoke") {
  ddl::Tensor a = ddl::arange(6).reshape({2, 3});
  CHECK(ddl::sum(a).item() == 15.0f);
}
