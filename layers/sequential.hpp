// Sequential: modules applied one after another, named "0", "1", ... in the
// order they were added (Keras' Sequential, PyTorch's nn.Sequential).
#pragma once

#include <memory>
#include <string>

#include <ddl/layers/module.hpp>

namespace ddl::layers {

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends a module; returns *this so calls chain.
  Sequential& add(std::shared_ptr<Module> module);
  template <class M, class... Args>
  Sequential& emplace(Args&&... args) {
    return add(std::make_shared<M>(std::forward<Args>(args)...));
  }

  std::size_t size() const { return children().size(); }
  Module& operator[](std::size_t index) const;

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sequential"; }
};

}  // namespace ddl::layers
