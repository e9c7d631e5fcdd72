// The layers of a tensor-parallel model that hold a slice of a whole
// layer's parameters or act on a slice of its activations. Their
// parameters and buffers keep the names the whole layer gives them, with
// the shape of this rank's slice, and split_of() says along which dim the
// whole one was cut: what joins a checkpoint into the single-process
// format, and cuts one back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <ddl/layers/module.hpp>

namespace ddl::parallel {

class SplitLayer : public layers::Module {
 public:
  struct Split {
    int dim = 0;
    std::int64_t whole = 0;  // the whole one's size along dim
  };
  // For this layer's own parameter or buffer `name`: none for one every
  // rank holds whole.
  virtual std::optional<Split> split_of(const std::string& name) const = 0;
};

}  // namespace ddl::parallel
