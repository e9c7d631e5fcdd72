#include <ddl/core/check.hpp>
#include <ddl/layers/sequential.hpp>

namespace ddl::layers {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& module : modules) add(module);
}

Sequential& Sequential::add(std::shared_ptr<Module> module) {
  DDL_CHECK(module != nullptr, "Sequential::add: module {} is null", size());
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

Module& Sequential::operator[](std::size_t index) const {
  DDL_CHECK(index < size(), "Sequential: index {} is out of range for {} modules", index, size());
  return *children()[index].second;
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [name, module] : children()) x = module->forward(x);
  return x;
}

}  // namespace ddl::layers
