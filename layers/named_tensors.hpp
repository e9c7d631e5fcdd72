// Named tensors, and copying them by name into other named tensors after
// checking every pair: what Module::load_state_dict and a checkpoint's
// restore (optim/checkpoint.hpp) share, so a bad entry is refused the same
// way everywhere, before anything has changed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ddl/core/tensor.hpp>

namespace ddl::layers {

using NamedTensor = std::pair<std::string, Tensor>;

struct CopyByNameOptions {
  // Every target needs a source and every source a target; when false, the
  // names both sides have are copied and the rest is reported, not refused.
  bool strict = true;
  // Put before every name in messages ("model." names "model.0.weight").
  std::string name_prefix{};
  // What the sources are, for messages: "'0.bias' is missing from <this>".
  std::string sources_name = "the sources";
  // Appended to a shape or dtype mismatch, given the target's name: how that
  // tensor is laid out (Dense's weight is [in, out], not PyTorch's [out, in]).
  std::function<std::string(const std::string& name)> layout_of{};
};

// The names that did not pair up (non-strict copies only; a strict copy
// throws instead): targets left unchanged, and sources ignored.
struct UnmatchedNames {
  std::vector<std::string> missing;     // targets without a source
  std::vector<std::string> unexpected;  // sources without a target
};

// The integer a dotted name starts with, up to its first '.': the layer of
// a Sequential's entry ("7.weight"), the parameter of an optimizer's
// ("3.momentum"); none for a name that does not start so.
std::optional<std::int64_t> leading_index(std::string_view name);

// Copies each source into the target of the same name with
// Tensor::copy_from: in place, so every handle to a target sees the new
// values, from any device to any device. First checks all of it, so a
// failure leaves every target as it was: no name twice on either side, no
// source undefined, the names the same set (if strict), and each pair the
// same dtype and shape. The first problem throws ddl::Error starting with
// `context` and naming the entry: missing, unexpected, or both dtypes and
// shapes.
UnmatchedNames copy_by_name(std::string_view context, const std::vector<NamedTensor>& targets,
                            const std::vector<NamedTensor>& sources, const CopyByNameOptions& options = {});

}  // namespace ddl::layers
