// Tunables (core/config.hpp): the logical CPU device count read from
// DDL_CPU_DEVICES, and the CPU thread count, which must not change results.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <cstdlib>
#include <cstring>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

TEST_CASE("config: cpu_device_count follows DDL_CPU_DEVICES") {
  const char* value = std::getenv("DDL_CPU_DEVICES");
  const int expected = value == nullptr || *value == '\0' ? 1 : std::atoi(value);
  CHECK(config::cpu_device_count() == expected);
  CHECK(device_count(DeviceType::CPU) == expected);
}

TEST_CASE("config: set_num_threads rejects a count below 1 or above kMaxThreads") {
  CHECK(throws_error_mentioning([] { set_num_threads(0); }, {"set_num_threads", "0"}));
  CHECK(throws_error_mentioning([] { set_num_threads(config::kMaxThreads + 1); },
                                {"set_num_threads", "from 1 to 1024", "1025"}));
  CHECK(config::available_cpus() >= 1);
}

TEST_CASE("config: the environment readers refuse anything but a positive number, naming the variable") {
  for (const char* bad : {"abc", "0", "-5", "nan", "inf", "1e999", "12x"}) {
    CAPTURE(bad);
    ::setenv("DDL_TEST_VALUE", bad, 1);
    CHECK(throws_error_mentioning([] { (void)config::positive_double_from_environment("DDL_TEST_VALUE", 1.0, 1e6); },
                                  {"DDL_TEST_VALUE", bad, "not a positive number"}));
    CHECK(throws_error_mentioning([] { (void)config::positive_bytes_from_environment("DDL_TEST_VALUE", 1); },
                                  {"DDL_TEST_VALUE", bad, "not a positive byte count"}));
  }
  ::setenv("DDL_TEST_VALUE", "99999999999999999999999", 1);  // past int64
  CHECK(throws_error_mentioning([] { (void)config::positive_bytes_from_environment("DDL_TEST_VALUE", 1); },
                                {"DDL_TEST_VALUE"}));
  // Past the maximum (seconds that would overflow a clock): refused, naming it.
  ::setenv("DDL_TEST_VALUE", "1e99", 1);
  CHECK(throws_error_mentioning([] { (void)config::positive_double_from_environment("DDL_TEST_VALUE", 1.0, 1e6); },
                                {"DDL_TEST_VALUE=1e99", "not a positive number up to 1e+06"}));
  ::setenv("DDL_TEST_VALUE", "1e6", 1);
  CHECK(config::positive_double_from_environment("DDL_TEST_VALUE", 1.0, 1e6) == 1e6);
  ::setenv("DDL_TEST_VALUE", "2.5", 1);
  CHECK(config::positive_double_from_environment("DDL_TEST_VALUE", 1.0, 1e6) == 2.5);
  ::unsetenv("DDL_TEST_VALUE");
  CHECK(config::positive_double_from_environment("DDL_TEST_VALUE", 1.5, 1e6) == 1.5);
  CHECK(config::positive_bytes_from_environment("DDL_TEST_VALUE", 7) == 7);
  config::check_environment();  // this process's own variables are fine
}

TEST_CASE("config: results are bitwise the same with one thread and with two") {
  // Large enough for the parallel paths (elementwise loops split above 2^15
  // elements, full sums in 2^14-element chunks).
  Generator generator(11);
  const Tensor x = uniform({1 << 17}, -1.0f, 1.0f, {}, &generator);
  const test::NumThreadsGuard threads;
  set_num_threads(1);
  const float sum_one = sum(x).item();
  const std::vector<float> tanh_one = tanh(x).to_vector<float>();
  const std::vector<float> row_sums_one = sum(x.reshape({1 << 16, 2}), 1).to_vector<float>();
  set_num_threads(2);
  const float sum_two = sum(x).item();
  const std::vector<float> tanh_two = tanh(x).to_vector<float>();
  const std::vector<float> row_sums_two = sum(x.reshape({1 << 16, 2}), 1).to_vector<float>();
  CHECK(std::memcmp(&sum_one, &sum_two, sizeof(float)) == 0);
  CHECK(tanh_one == tanh_two);
  CHECK(row_sums_one == row_sums_two);
}
