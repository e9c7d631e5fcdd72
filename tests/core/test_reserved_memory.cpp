// ReservedMemory (core/reserved_memory.hpp): a tensor on it keeps its
// address while the memory behind it is given back and taken again, which
// sharding stage 3 relies on; on the host and on a GPU.
#include <doctest/doctest.h>

#include <ddl/core/reserved_memory.hpp>
#include <ddl/ddl.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;

namespace {

// Three rounds of commit, write and read, release, on `device`; a size that
// is no multiple of a page or of a GPU's 2 MiB granularity.
void cycle(const Device& device) {
  const std::int64_t n = (3 << 19) + 7;
  const std::shared_ptr<ReservedMemory> memory = ReservedMemory::make(device, n * sizeof(float));
  const Tensor tensor = memory->tensor(n);
  const void* address = tensor.raw_data();
  CHECK(tensor.device() == device);
  CHECK(memory->committed());
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    memory->commit();  // a no-op in round 0
    Generator generator(static_cast<std::uint64_t>(round) + 1);
    const std::vector<float> values = test::uniform_tensor({n}, generator).to_vector<float>();
    tensor.copy_from(from_vector(values, {n}).to(device));
    // Written and read on the device too.
    CHECK((tensor * 2.0f).to_vector<float>() == (from_vector(values, {n}) * 2.0f).to_vector<float>());
    memory->release();
    CHECK_FALSE(memory->committed());
    CHECK(tensor.raw_data() == address);
  }
  // Released, the host's pages read as zeros until written (a GPU's must not be read).
  if (device.is_cpu()) CHECK(tensor.to_vector<float>() == std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  CHECK(test::throws_error_mentioning([&] { memory->tensor(n * 4); }, {"does not fit"}));
}

}  // namespace

TEST_CASE("ReservedMemory: on the host a tensor keeps its address while the pages come and go") { cycle(cpu()); }

TEST_CASE("ReservedMemory: on a GPU a tensor keeps its address while the physical memory comes and goes" *
          doctest::test_suite("cuda")) {
  if (!cuda_available()) return test::skip("no CUDA device");
  cycle(cuda(0));
}

TEST_CASE("ReservedMemory: the tensors made on it keep it alive") {
  std::shared_ptr<ReservedMemory> memory = ReservedMemory::make(cpu(), 100);
  const std::weak_ptr<ReservedMemory> watch = memory;
  Tensor tensor = memory->tensor(25);
  memory.reset();
  CHECK_FALSE(watch.expired());
  tensor = Tensor();
  CHECK(watch.expired());
}
