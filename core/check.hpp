// Internal: DDL_CHECK(condition, "format {}", args...) throws ddl::Error with
// a formatted message. Also teaches fmt to print Shape, Device and DType so
// messages can name them directly. Not installed as part of the public API.
#pragma once

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ddl/core/device.hpp>
#include <ddl/core/dtype.hpp>
#include <ddl/core/error.hpp>
#include <ddl/core/shape.hpp>

template <>
struct fmt::formatter<ddl::Shape> : fmt::ostream_formatter {};
template <>
struct fmt::formatter<ddl::Device> : fmt::ostream_formatter {};
template <>
struct fmt::formatter<ddl::DType> : fmt::ostream_formatter {};

namespace ddl::detail {

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ddl::detail

#define DDL_CHECK(condition, ...)        \
  do {                                   \
    if (!(condition)) {                  \
      ::ddl::detail::fail(__VA_ARGS__);  \
    }                                    \
  } while (false)
