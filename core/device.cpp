#include <ddl/core/check.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/cuda/runtime.hpp>

#include <charconv>

namespace ddl {

Device Device::parse(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    DDL_CHECK(error == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0,
              "Device: cannot parse '{}' (expected cpu, cpu:N, cuda or cuda:N)", text);
  }
  if (kind == "cpu") return cpu(index);
  if (kind == "cuda") return cuda(index);
  detail::fail("Device: cannot parse '{}' (expected cpu, cpu:N, cuda or cuda:N)", text);
}

std::string Device::str() const { return (is_cpu() ? "cpu:" : "cuda:") + std::to_string(index_); }

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

int device_count(DeviceType type) {
  return type == DeviceType::CPU ? config::cpu_device_count() : cuda_backend::device_count();
}

bool cuda_available() { return cuda_backend::device_count() > 0; }

std::vector<Device> available_devices() {
  std::vector<Device> devices;
  for (int i = 0; i < device_count(DeviceType::CPU); ++i) devices.push_back(cpu(i));
  for (int i = 0; i < device_count(DeviceType::CUDA); ++i) devices.push_back(cuda(i));
  return devices;
}

void check_device_exists(const Device& device) {
  const int count = device_count(device.type());
  if (device.index() < count) return;
  if (device.is_cpu()) {
    detail::fail("device {} does not exist: {} logical CPU device(s) (set DDL_CPU_DEVICES for more)", device, count);
  }
  detail::fail("device {} does not exist: {} CUDA device(s) available ({})", device, count, cuda_backend::unavailable_reason());
}

}  // namespace ddl
