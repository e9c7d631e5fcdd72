// Internal to the CUDA backend: one value per device (a stream, a library
// handle, a launch limit), made on first use with that device current and
// kept for the life of the process, as the CUDA context it belongs to.
// Thread-safe: ops may run on several threads (a communication thread).
#pragma once

#include <ddl/core/cuda/device_guard.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

namespace ddl::cuda_backend {

template <class T>
class PerDevice {
 public:
  using Make = T (*)(int device);

  // `make` creates device d's value; if it throws, the next get() retries.
  explicit PerDevice(Make make) : make_(make), values_(static_cast<std::size_t>(device_count())) {}

  T get(int device) {
    const std::lock_guard lock(mutex_);
    std::optional<T>& value = values_.at(static_cast<std::size_t>(device));
    if (!value) {
      const DeviceGuard guard(device);
      value = make_(device);
    }
    return *value;
  }

 private:
  Make make_;
  std::mutex mutex_;
  std::vector<std::optional<T>> values_;
};

}  // namespace ddl::cuda_backend
