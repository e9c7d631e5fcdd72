// Per-device memory: 64-byte alignment of CPU buffers and the counters of
// bytes in use, live allocations and the peak (core/allocator.hpp). Counts
// are checked as differences, since other tests in the process allocate too.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include <cstdint>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::throws_error_mentioning;

namespace {
void require_two_cpu_devices() {
  REQUIRE_MESSAGE(device_count(DeviceType::CPU) >= 2, "run with DDL_CPU_DEVICES=2 (ctest sets it)");
}
}  // namespace

TEST_CASE("allocator: CPU data pointers are 64-byte aligned for every size and dtype") {
  require_two_cpu_devices();
  for (const std::int64_t n : {0, 1, 3, 7, 13, 16, 17, 1000, 4097}) {
    for (const DType dtype : {DType::Float32, DType::Int32, DType::Int64}) {
      for (const Device device : {cpu(0), cpu(1)}) {
        const Tensor t = Tensor::empty({n}, {dtype, device, false});
        CAPTURE(n);
        CHECK(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64 == 0);
      }
    }
  }
}

TEST_CASE("memory_stats: bytes in use rise by a tensor's size and fall back when it dies") {
  require_two_cpu_devices();
  const MemoryStats before = memory_stats(cpu(1));
  {
    const Tensor t = zeros({13, 7}, TensorOptions{}.with_device(cpu(1)));
    const MemoryStats during = memory_stats(cpu(1));
    CHECK(during.bytes_in_use == before.bytes_in_use + 13 * 7 * sizeof(float));
    CHECK(during.allocations == before.allocations + 1);
  }
  const MemoryStats after = memory_stats(cpu(1));
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.allocations == before.allocations);
}

TEST_CASE("memory_stats: each logical CPU device counts only its own memory") {
  require_two_cpu_devices();
  const MemoryStats cpu0_before = memory_stats(cpu(0));
  const MemoryStats cpu1_before = memory_stats(cpu(1));
  const Tensor t = ones({1000}, TensorOptions{}.with_device(cpu(1)));
  CHECK(memory_stats(cpu(0)).bytes_in_use == cpu0_before.bytes_in_use);
  CHECK(memory_stats(cpu(1)).bytes_in_use == cpu1_before.bytes_in_use + 4000);
}

TEST_CASE("memory_stats: views share storage and allocate nothing") {
  const Tensor t = zeros({6, 4});
  const MemoryStats before = memory_stats(cpu(0));
  const Tensor v = t.reshape({24});
  const Tensor d = t.detach();
  CHECK(memory_stats(cpu(0)).bytes_in_use == before.bytes_in_use);
  CHECK(memory_stats(cpu(0)).allocations == before.allocations);
}

TEST_CASE("memory_stats: the peak records the high-water mark until reset") {
  require_two_cpu_devices();
  const Device device = cpu(1);
  reset_peak_memory_stats(device);
  const MemoryStats base = memory_stats(device);
  CHECK(base.peak_bytes == base.bytes_in_use);
  { const Tensor big = zeros({1 << 16}, TensorOptions{}.with_device(device)); }
  const Tensor small = zeros({1 << 10}, TensorOptions{}.with_device(device));
  const MemoryStats now = memory_stats(device);
  CHECK(now.bytes_in_use == base.bytes_in_use + (1 << 10) * sizeof(float));
  CHECK(now.peak_bytes == base.bytes_in_use + (1 << 16) * sizeof(float));
  reset_peak_memory_stats(device);
  CHECK(memory_stats(device).peak_bytes == now.bytes_in_use);
}

TEST_CASE("memory_stats: a device that does not exist throws naming it") {
  CHECK(throws_error_mentioning([] { memory_stats(cpu(64)); }, {"cpu:64"}));
  CHECK(throws_error_mentioning([] { reset_peak_memory_stats(cpu(64)); }, {"cpu:64"}));
}
