// Element types: float32 for everything that is differentiated, int32 and
// int64 for labels and indices (argmax returns int64).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace ddl {

enum class DType { Float32, Int32, Int64 };

constexpr std::size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
  }
  return "?";
}

inline std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

// The DType that stores a C++ element type, for typed accessors.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::Float32; }
template <>
constexpr DType dtype_of<std::int32_t>() { return DType::Int32; }
template <>
constexpr DType dtype_of<std::int64_t>() { return DType::Int64; }

}  // namespace ddl
