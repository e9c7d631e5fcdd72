// Reading and setting a module's state by name (layers/module.cpp,
// named_tensors.cpp): state_dict's names and sharing, load_state_dict's
// copies in place and its refusals, each naming the entry and changing
// nothing, the non-strict mode, set_parameter, and Dense's [in, out] layout.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::throws_error_mentioning;

namespace {

// conv - batch norm - flatten - dense: parameters, buffers and a child
// without either.
std::shared_ptr<layers::Sequential> small_model(std::uint64_t seed) {
  Generator generator(seed);
  auto model = std::make_shared<layers::Sequential>();
  model->emplace<layers::Conv2d>(2, 3, layers::Conv2dOptions{.kernel_size = {2, 3}}, &generator)
      .emplace<layers::BatchNorm2d>(3)
      .emplace<layers::Flatten>()
      .emplace<layers::Dense>(3 * 3 * 2, 5, true, &generator);
  // Buffers that differ between seeds too.
  const Tensor input = test::uniform_tensor({4, 2, 4, 4}, generator);
  (*model)(input);
  return model;
}

std::vector<std::vector<float>> values_of(const layers::Module& model) {
  std::vector<std::vector<float>> values;
  for (const auto& [name, tensor] : model.state_dict()) values.push_back(tensor.to_vector<float>());
  return values;
}

// The state of `model` with the entry `name` replaced by `value`.
std::vector<layers::NamedTensor> replaced(const layers::Module& model, const std::string& name, const Tensor& value) {
  auto entries = model.state_dict();
  for (auto& [entry_name, tensor] : entries) {
    if (entry_name == name) tensor = value;
  }
  return entries;
}

}  // namespace

TEST_CASE("state_dict lists the parameters, then the buffers, by dotted name, sharing their memory") {
  const auto model = small_model(1);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : model->state_dict()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias",
                                          "1.running_mean", "1.running_var"});
  const Tensor bias = model->state_dict()[5].second;
  bias.copy_from(full({5}, 2.0));
  CHECK(all_close(static_cast<const layers::Dense&>((*model)[3]).bias(), std::vector<float>(5, 2.0f), 0, 0));
}

TEST_CASE("load_state_dict copies every parameter and buffer in place, from any device") {
  const auto source = small_model(2);
  const auto target = small_model(3);
  REQUIRE(values_of(*source) != values_of(*target));
  const std::vector<Tensor> handles = target->parameters();  // as an optimizer holds them
  std::vector<layers::NamedTensor> entries;
  for (const auto& [name, tensor] : source->state_dict()) entries.emplace_back(name, tensor.to(cpu(1)));
  const layers::UnmatchedNames unmatched = target->load_state_dict(entries);
  CHECK(unmatched.missing.empty());
  CHECK(unmatched.unexpected.empty());
  CHECK(values_of(*target) == values_of(*source));
  CHECK(all_close(handles[0], source->parameters()[0], 0, 0));
  CHECK(handles[0].device() == cpu(0));
}

TEST_CASE("load_state_dict refuses a missing, unexpected, misshapen, mistyped, repeated or undefined entry") {
  const auto source = small_model(4);
  const auto target = small_model(5);
  const auto before = values_of(*target);
  auto entries = source->state_dict();

  auto missing = entries;
  missing.erase(missing.begin() + 5);
  CHECK(throws_error_mentioning([&] { target->load_state_dict(missing); },
                                {"Sequential", "load_state_dict", "'3.bias'", "missing"}));
  auto unexpected = entries;
  unexpected.emplace_back("4.weight", zeros({2}));
  CHECK(throws_error_mentioning([&] { target->load_state_dict(unexpected); }, {"unexpected", "'4.weight'"}));
  CHECK(throws_error_mentioning([&] { target->load_state_dict(replaced(*source, "1.running_var", zeros({4}))); },
                                {"'1.running_var'", "[4]", "[3]"}));
  CHECK(
      throws_error_mentioning([&] { target->load_state_dict(replaced(*source, "0.bias", zeros({3}, {DType::Int64}))); },
                              {"'0.bias'", "int64", "float32"}));
  auto repeated = entries;
  repeated.push_back(entries[0]);
  CHECK(throws_error_mentioning([&] { target->load_state_dict(repeated); }, {"'0.weight'", "twice"}));
  CHECK(throws_error_mentioning([&] { target->load_state_dict(replaced(*source, "1.weight", Tensor())); },
                                {"'1.weight'", "undefined"}));
  // A bad entry after good ones: nothing was copied before the check.
  CHECK(values_of(*target) == before);
}

TEST_CASE("load_state_dict without strict loads the names that match and reports the others") {
  const auto source = small_model(6);
  const auto target = small_model(7);
  const auto before = target->state_dict()[0].second.to_vector<float>();
  std::vector<layers::NamedTensor> entries{source->state_dict()[2], {"extra", ones({1})}};
  const layers::UnmatchedNames unmatched = target->load_state_dict(entries, false);
  CHECK(unmatched.unexpected == std::vector<std::string>{"extra"});
  CHECK(unmatched.missing.size() == 7);
  CHECK(unmatched.missing.front() == "0.weight");
  CHECK(all_close(target->state_dict()[2].second, source->state_dict()[2].second, 0, 0));
  CHECK(all_close(target->state_dict()[0].second, before, 0, 0));
  // A shape mismatch is never ignored.
  CHECK(throws_error_mentioning(
      [&] {
        target->load_state_dict({{"1.weight", zeros({2})}}, false);
      },
      {"'1.weight'", "[2]", "[3]"}));
}

TEST_CASE("a Dense weight in PyTorch's [out, in] layout is refused with a note on the layout") {
  layers::Dense dense(4, 3);
  CHECK(throws_error_mentioning(
      [&] {
        dense.load_state_dict({{"weight", zeros({3, 4})}, {"bias", zeros({3})}});
      },
      {"'weight'", "[3, 4]", "[4, 3]", "Dense(4, 3)", "[in, out]", "PyTorch"}));
  CHECK(throws_error_mentioning([&] { dense.set_parameter("weight", zeros({3, 4})); }, {"[in, out]", "transpose"}));
  // Nested, the note still comes from the Dense layer that owns the weight.
  const auto model = small_model(8);
  CHECK(throws_error_mentioning(
      [&] {
        model->set_parameter("3.weight", zeros({5, 18}));
      },
      {"'3.weight'", "Dense(18, 5)", "[in, out] = [18, 5]"}));
  CHECK(throws_error_mentioning(
      [&] {
        model->set_parameter("0.weight", zeros({3, 2, 3, 2}));
      },
      {"'0.weight'", "OIHW", "[3, 2, 2, 3]"}));
  // Square: both layouts have the same shape, so only the documentation can
  // prevent a forgotten transpose; the values load as given.
  layers::Dense square(2, 2, false);
  square.set_parameter("weight", from_vector({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}));
  CHECK(all_close(square(from_vector({1.0f, 0.0f}, {1, 2})), {1.0f, 2.0f}, 0, 0));  // row 0 of [in, out]
}

TEST_CASE("set_parameter copies into one parameter in place and names the parameters on an unknown name") {
  const auto model = small_model(9);
  const Tensor handle = model->parameters()[1];
  model->set_parameter("0.bias", from_vector({1.0f, -2.0f, 3.0f}, {3}));
  CHECK(all_close(handle, {1.0f, -2.0f, 3.0f}, 0, 0));
  CHECK(handle.requires_grad());
  CHECK(throws_error_mentioning([&] { model->set_parameter("0.kernel", zeros({3})); },
                                {"set_parameter", "'0.kernel'", "0.weight, 0.bias, 1.weight"}));
  // Buffers are state, not parameters: load_state_dict sets them.
  CHECK(throws_error_mentioning([&] { model->set_parameter("1.running_mean", zeros({3})); }, {"'1.running_mean'"}));
  CHECK(throws_error_mentioning([&] { model->set_parameter("0.bias", zeros({4})); }, {"'0.bias'", "[4]", "[3]"}));
}
