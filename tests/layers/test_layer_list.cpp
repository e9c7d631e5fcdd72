// LayerList (layers/layer_list.hpp): a part of a model built alone has the
// weights and the names it has in the whole model.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include "support/test_data.hpp"

namespace ddl::test {

TEST_CASE("LayerList: any range of layers built alone equals that range of the whole model, names included") {
  const layers::LayerList list = models::model_layers("resnet_small");
  REQUIRE(list.size() == 9);
  Generator whole_generator(21);
  const auto whole = list.build(&whole_generator);
  const auto whole_state = whole->state_dict();
  for (std::size_t first = 0; first < list.size(); ++first) {
    for (std::size_t last = first; last < list.size(); ++last) {
      Generator generator(21);
      const auto part = list.build(&generator, first, last);
      REQUIRE(part->size() == last - first + 1);
      CHECK(part->children().front().first == std::to_string(first));
      for (const auto& entry : part->state_dict()) {
        const auto& name = entry.first;
        const auto& tensor = entry.second;
        CAPTURE(name);
        const auto same = std::find_if(whole_state.begin(), whole_state.end(),
                                       [&](const auto& entry) { return entry.first == name; });
        REQUIRE(same != whole_state.end());
        CHECK(tensor.to_vector<float>() == same->second.to_vector<float>());
      }
    }
  }
}

TEST_CASE("LayerList: emplace_init passes the generator to layers with weights, and parameter_bytes counts each layer") {
  layers::LayerList list;
  list.emplace_init<layers::Dense>(3, 5, true).emplace<layers::ReLU>().emplace_init<layers::Dense>(5, 2, false);
  CHECK(list.parameter_bytes() == std::vector<std::size_t>{4 * (3 * 5 + 5), 0, 4 * 5 * 2});
  Generator a(4), b(4);
  const auto built = list.build(&a);
  layers::Sequential by_hand;
  by_hand.emplace<layers::Dense>(3, 5, true, &b).emplace<layers::ReLU>().emplace<layers::Dense>(5, 2, false, &b);
  CHECK(flat_parameters(*built) == flat_parameters(by_hand));
}

TEST_CASE("LayerList: a range outside the list, an empty list or an empty factory is refused") {
  layers::LayerList list;
  CHECK(throws_error_mentioning([&] { list.build(); }, {"no layers"}));
  CHECK(throws_error_mentioning([&] { list.add(nullptr); }, {"layer 0", "empty"}));
  list.emplace<layers::ReLU>().emplace<layers::Tanh>();
  CHECK(throws_error_mentioning([&] { list.build(nullptr, 1, 2); }, {"1-2", "2 layers (0-1)"}));
  CHECK(throws_error_mentioning([&] { list.build(nullptr, 1, 0); }, {"1-0"}));
  CHECK(throws_error_mentioning([&] { list.build_layer(5, nullptr); }, {"layer 5 is out of range"}));
  list.add([](Generator*) { return std::shared_ptr<layers::Module>(); });
  CHECK(throws_error_mentioning([&] { list.build(); }, {"layer 2 made no module"}));
}

}  // namespace ddl::test
