// Device names, discovery of logical CPU devices and CUDA devices, and the
// errors for devices that do not exist (core/device.hpp). ctest runs this
// suite with DDL_CPU_DEVICES=2.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

TEST_CASE("Device::parse: reads cpu, cpu:N, cuda and cuda:N") {
  CHECK(Device::parse("cpu") == cpu(0));
  CHECK(Device::parse("cpu:0") == cpu(0));
  CHECK(Device::parse("cpu:1") == cpu(1));
  CHECK(Device::parse("cuda") == cuda(0));
  CHECK(Device::parse("cuda:0") == cuda(0));
  CHECK(Device::parse("cuda:3") == cuda(3));
  CHECK(Device::parse("cuda:3").is_cuda());
  CHECK(Device::parse("cpu:1").is_cpu());
}

TEST_CASE("Device::parse: malformed names throw quoting the text") {
  for (const char* text :
       {"", "gpu", "CPU", "cpu:", "cpu:x", "cpu:1x", "cpu:-1", "cuda:+1", ":0", " cpu", "cpu 1", "cuda:99999999999"}) {
    INFO("text: \"", text, "\"");
    CHECK(throws_error_mentioning([&] { Device::parse(text); },
                                  {"Device", "cannot parse", std::string("'") + text + "'"}));
  }
}

TEST_CASE("Device: str round-trips through parse") {
  for (const Device device : {cpu(0), cpu(1), cuda(0), cuda(2)}) {
    CHECK(Device::parse(device.str()) == device);
  }
  CHECK(cpu(1).str() == "cpu:1");
  CHECK(cuda(0).str() == "cuda:0");
}

TEST_CASE("available_devices: lists cpu:0 to cpu:N-1 from DDL_CPU_DEVICES, then the CUDA devices") {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
  const std::vector<Device> devices = available_devices();
  const int cpus = device_count(DeviceType::CPU), gpus = device_count(DeviceType::CUDA);
  REQUIRE(devices.size() == static_cast<std::size_t>(cpus + gpus));
  for (int i = 0; i < cpus; ++i) CHECK(devices[static_cast<std::size_t>(i)] == cpu(i));
  for (int i = 0; i < gpus; ++i) CHECK(devices[static_cast<std::size_t>(cpus + i)] == cuda(i));
  CHECK(cuda_available() == (gpus > 0));
}

TEST_CASE("check_device_exists: a CPU index past DDL_CPU_DEVICES throws naming the device and the variable") {
  CHECK_NOTHROW(check_device_exists(cpu(0)));
  CHECK(throws_error_mentioning([] { check_device_exists(cpu(64)); }, {"cpu:64", "DDL_CPU_DEVICES"}));
}

TEST_CASE("check_device_exists: without a GPU, cuda:0 throws with the reason instead of crashing") {
  if (cuda_available()) {
    CHECK_NOTHROW(check_device_exists(cuda(0)));
    return;
  }
  CHECK(throws_error_mentioning([] { check_device_exists(cuda(0)); }, {"cuda:0", "0 CUDA device"}));
  // Any use of the missing device is an error, never an abort.
  CHECK(throws_error_mentioning([] { zeros({2}, TensorOptions{}.with_device(cuda(0))); }, {"cuda:0"}));
  CHECK(throws_error_mentioning([] { ones({2}).to(cuda(0)); }, {"cuda:0"}));
}
