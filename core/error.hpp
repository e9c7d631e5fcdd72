// ddl::Error, the one exception type of the library, and DDL_CHECK, which
// throws it with a message that names the operation and the values involved.
// Every failed precondition and every failed library call ends up here.
#pragma once

#include <stdexcept>
#include <string>

namespace ddl {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ddl
