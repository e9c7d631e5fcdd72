// Device: where a tensor's memory lives, "cpu:N" or "cuda:N". Logical CPU
// devices (DDL_CPU_DEVICES=N, like JAX's host device count) let placement code
// run without a GPU: each has its own memory accounting, and moving a tensor
// between them is a real copy.
#pragma once

#include <compare>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace ddl {

enum class DeviceType { CPU, CUDA };

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}
  // Parses "cpu", "cpu:1", "cuda", "cuda:0"; throws ddl::Error on anything else.
  static Device parse(std::string_view text);

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  std::string str() const;

  constexpr bool operator==(const Device&) const = default;
  constexpr auto operator<=>(const Device&) const = default;  // CPUs first, then by index

 private:
  DeviceType type_ = DeviceType::CPU;
  int index_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Device& device);

constexpr Device cpu(int index = 0) { return {DeviceType::CPU, index}; }
constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }

// How many devices of a type exist. CUDA is 0 when the library was built
// without it or no driver/GPU is present (the reason is printed once).
int device_count(DeviceType type);
bool cuda_available();
// Every device that exists: cpu:0..N-1, then cuda:0..M-1.
std::vector<Device> available_devices();
// Throws ddl::Error naming the device if it does not exist.
void check_device_exists(const Device& device);

}  // namespace ddl
