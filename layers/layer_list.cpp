// LayerList (see layer_list.hpp).
#include <ddl/layers/layer_list.hpp>

#include <string>

#include <ddl/core/check.hpp>

namespace ddl::layers {

LayerList& LayerList::add(Factory factory) {
  DDL_CHECK(factory != nullptr, "LayerList::add: the factory of layer {} is empty", size());
  factories_.push_back(std::move(factory));
  return *this;
}

std::shared_ptr<Module> LayerList::build_layer(std::size_t index, Generator* generator) const {
  DDL_CHECK(index < size(), "LayerList: layer {} is out of range: the list has {} layers", index, size());
  auto layer = factories_[index](generator != nullptr ? generator : &default_generator());
  DDL_CHECK(layer != nullptr, "LayerList: the factory of layer {} made no module", index);
  return layer;
}

std::shared_ptr<Sequential> LayerList::build(Generator* generator) const {
  DDL_CHECK(size() > 0, "LayerList::build: the list has no layers");
  return build(generator, 0, size() - 1);
}

std::shared_ptr<Sequential> LayerList::build(Generator* generator, std::size_t first, std::size_t last) const {
  DDL_CHECK(first <= last && last < size(), "LayerList::build: layers {}-{} are not a range of the {} layers (0-{})",
            first, last, size(), size() == 0 ? 0 : size() - 1);
  for (std::size_t i = 0; i < first; ++i) build_layer(i, generator);  // its draws only
  auto model = std::make_shared<Sequential>();
  for (std::size_t i = first; i <= last; ++i) model->add(std::to_string(i), build_layer(i, generator));
  return model;
}

std::vector<std::size_t> LayerList::parameter_bytes() const {
  std::vector<std::size_t> bytes;
  Generator scratch(0);
  for (std::size_t i = 0; i < size(); ++i) {
    std::size_t layer_bytes = 0;
    for (const Tensor& param : build_layer(i, &scratch)->parameters()) layer_bytes += param.nbytes();
    bytes.push_back(layer_bytes);
  }
  return bytes;
}

}  // namespace ddl::layers
