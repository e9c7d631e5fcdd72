// LayerList: a Sequential described before it is built, one factory per
// layer, so a pipeline stage can build its own layers and no others
// (DeepSpeed's LayerSpec). The factories run in order with one generator, so
// the layers of any part get the weights they get in the whole model.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <ddl/core/random.hpp>
#include <ddl/layers/sequential.hpp>

namespace ddl::layers {

class LayerList {
 public:
  // Makes one layer, drawing its initial weights from the generator.
  using Factory = std::function<std::shared_ptr<Module>(Generator*)>;

  LayerList& add(Factory factory);
  // A layer of type M made from `args`; returns *this so calls chain.
  template <class M, class... Args>
  LayerList& emplace(Args... args) {
    return add([args...](Generator*) -> std::shared_ptr<Module> { return std::make_shared<M>(args...); });
  }
  // A layer with weights (Dense, Conv2d): M(args..., generator), the
  // generator initialising them. Only these get it: Dropout also takes a
  // generator, but keeps it to draw masks, and must not keep the builder's.
  template <class M, class... Args>
  LayerList& emplace_init(Args... args) {
    return add([args...](Generator* generator) -> std::shared_ptr<Module> {
      return std::make_shared<M>(args..., generator);
    });
  }

  std::size_t size() const { return factories_.size(); }

  // The whole model, children named 0, 1, ... (null generator:
  // default_generator()).
  std::shared_ptr<Sequential> build(Generator* generator = nullptr) const;
  // Layers first..last (inclusive), each named by its index in the whole
  // model, so state_dict() names are the whole model's. The layers before
  // `first` are built and dropped one at a time, only for their draws from
  // the generator; those after `last` are never built. Throws ddl::Error for
  // a range outside the list.
  std::shared_ptr<Sequential> build(Generator* generator, std::size_t first, std::size_t last) const;
  // Layer `index` alone, from `generator` as it stands.
  std::shared_ptr<Module> build_layer(std::size_t index, Generator* generator) const;

  // The bytes of each layer's parameters, from building each alone with a
  // scratch generator: what balancing stages by parameters needs.
  std::vector<std::size_t> parameter_bytes() const;

 private:
  std::vector<Factory> factories_;
};

}  // namespace ddl::layers
