// CUDA's virtual memory management for ReservedMemory (runtime.hpp,
// core/reserved_memory.hpp). These are driver API calls: they are looked up
// through the runtime (cudaGetDriverEntryPointByVersion) rather than linked,
// so that libddl needs libcuda no more than it does now, and a machine
// without a driver still loads it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include <ddl/core/check.hpp>
#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/errors.hpp>
#include <ddl/core/cuda/runtime.hpp>

namespace ddl::cuda_backend {
namespace {

struct Driver {
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) free_addresses = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  decltype(&cuGetErrorName) error_name = nullptr;
  decltype(&cuGetErrorString) error_string = nullptr;
};

// The entry points of the CUDA 12 ABI, which the CUDA 13 driver still serves.
template <class Function>
void look_up(int device, const char* symbol, Function& function) {
  void* found = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  DDL_CUDA_CHECK(device, cudaGetDriverEntryPointByVersion(symbol, &found, 12000, cudaEnableDefault, &status));
  DDL_CHECK(status == cudaDriverEntryPointSuccess && found != nullptr,
            "CUDA's virtual memory management: the driver has no {}", symbol);
  function = reinterpret_cast<Function>(found);
}

// Looked up once, by the first call (on `device`, which its errors name).
const Driver& driver(int device) {
  static Driver functions;
  static std::once_flag once;
  std::call_once(once, [device] {
    look_up(device, "cuMemGetAllocationGranularity", functions.granularity);
    look_up(device, "cuMemAddressReserve", functions.reserve);
    look_up(device, "cuMemAddressFree", functions.free_addresses);
    look_up(device, "cuMemCreate", functions.create);
    look_up(device, "cuMemRelease", functions.release);
    look_up(device, "cuMemMap", functions.map);
    look_up(device, "cuMemUnmap", functions.unmap);
    look_up(device, "cuMemSetAccess", functions.set_access);
    look_up(device, "cuGetErrorName", functions.error_name);
    look_up(device, "cuGetErrorString", functions.error_string);
  });
  return functions;
}

void check(int device, CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver(device).error_name(result, &name) != CUDA_SUCCESS) name = "an error the driver cannot name";
  if (driver(device).error_string(result, &text) != CUDA_SUCCESS) text = "no description";
  fail_call(call, device, name, text, __FILE__, __LINE__);
}

// Device memory that only this process maps, on `device`.
CUmemAllocationProp device_memory(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// The driver's calls act in the thread's current context: a runtime call
// binds the device's primary context, the one ddl's streams and memory
// live in, also on a thread that has not used CUDA yet (a prefetching one).
class InContext {
 public:
  explicit InContext(int device) : guard_(device) { DDL_CUDA_CHECK(device, cudaFree(nullptr)); }

 private:
  DeviceGuard guard_;
};

}  // namespace

void* reserve_addresses(int device, std::size_t bytes, std::size_t* reserved) {
  const InContext context(device);
  const CUmemAllocationProp prop = device_memory(device);
  std::size_t granularity = 0;
  check(device, driver(device).granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  *reserved = std::max<std::size_t>((bytes + granularity - 1) / granularity, 1) * granularity;
  CUdeviceptr address = 0;
  check(device, driver(device).reserve(&address, *reserved, 0, 0, 0), "cuMemAddressReserve");
  return reinterpret_cast<void*>(address);
}

void free_addresses(int device, void* data, std::size_t reserved) {
  const InContext context(device);
  check(device, driver(device).free_addresses(reinterpret_cast<CUdeviceptr>(data), reserved), "cuMemAddressFree");
}

std::uint64_t map_memory(int device, void* data, std::size_t reserved) {
  const InContext context(device);
  const Driver& cu = driver(device);
  const CUmemAllocationProp prop = device_memory(device);
  CUmemGenericAllocationHandle physical = 0;
  CUresult created = cu.create(&physical, reserved, &prop, 0);
  if (created == CUDA_ERROR_OUT_OF_MEMORY) {
    // The caching allocator may hold what is missing (freed activations,
    // while backward gathers): as its own allocations do, give it back and
    // try once more.
    empty_cache(device);
    created = cu.create(&physical, reserved, &prop, 0);
  }
  check(device, created, "cuMemCreate");
  const auto address = reinterpret_cast<CUdeviceptr>(data);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const CUresult mapped = cu.map(address, reserved, 0, physical, 0);
  const CUresult accessible = mapped == CUDA_SUCCESS ? cu.set_access(address, reserved, &access, 1) : mapped;
  if (accessible != CUDA_SUCCESS) {
    // Undone, so that the addresses can be mapped again and freed; the
    // first failure is the one reported.
    if (mapped == CUDA_SUCCESS) cu.unmap(address, reserved);
    cu.release(physical);
    check(device, accessible, mapped == CUDA_SUCCESS ? "cuMemSetAccess" : "cuMemMap");
  }
  return physical;
}

void unmap_memory(int device, void* data, std::size_t reserved, std::uint64_t physical) {
  synchronize(device);
  const InContext context(device);
  check(device, driver(device).unmap(reinterpret_cast<CUdeviceptr>(data), reserved), "cuMemUnmap");
  // The physical memory is freed once nothing maps it any more.
  check(device, driver(device).release(physical), "cuMemRelease");
}

}  // namespace ddl::cuda_backend
