// The tensor-parallel plan (parallel/tensor/tensor_plan.hpp), which needs
// no ranks: which layers of the bundled models a tensor group splits, and
// the plans it refuses.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/parallel/tensor/tensor_plan.hpp>

#include "support/test_data.hpp"

using namespace ddl;
using namespace ddl::parallel;
using ddl::test::throws_error_mentioning;

TEST_CASE("plan_tensor_parallel: the bundled models' Megatron pairs") {
  CHECK(plan_tensor_parallel(models::model_layers("mnist_cnn"), 2).describe() == "column 0 + row 2; column 7 + row 10");
  CHECK(plan_tensor_parallel(models::model_layers("wide_mlp"), 3).describe() ==
        "column 1 + row 3; column 5 + row 7; column 9 + row 11; column 13 + row 15");
  CHECK(plan_tensor_parallel(models::model_layers("resnet_small"), 4).describe() ==
        "column 3.body.0 + row 3.body.3; column 4.body.0 + row 4.body.3; column 5.body.0 + row 5.body.3");
}

TEST_CASE("plan_tensor_parallel: what lies between a pair acts on each rank's part") {
  const TensorPlan cnn = plan_tensor_parallel(models::model_layers("mnist_cnn"), 2);
  CHECK(cnn.role_of("1") == TensorRole::sharded);  // ReLU on the first convolution's channels
  CHECK(cnn.role_of("9") == TensorRole::sharded);  // Dropout on the first Dense layer's features
  CHECK_FALSE(cnn.role_of("5").has_value());       // Dropout on a replicated activation: one mask
  CHECK_FALSE(cnn.role_of("4").has_value());       // MaxPool2d after the pair
  const TensorPlan resnet = plan_tensor_parallel(models::model_layers("resnet_small"), 2);
  CHECK(resnet.role_of("3.body.1") == TensorRole::sharded);  // BatchNorm2d on the block's split channels
  CHECK_FALSE(resnet.role_of("3.body.4").has_value());       // BatchNorm2d after the row convolution
  CHECK_FALSE(resnet.role_of("0").has_value());              // the stem: its partner would be a block
  CHECK(resnet.layers == models::model_layers("resnet_small").size());
}

TEST_CASE(
    "plan_tensor_parallel: a layer narrower than the group stays whole, and a plan that splits nothing is refused") {
  // mnist_cnn's first convolution has 32 output channels: at 64 ranks only the Dense pair (128 features) splits.
  CHECK(plan_tensor_parallel(models::model_layers("mnist_cnn"), 64).describe() == "column 7 + row 10");
  CHECK(throws_error_mentioning([] { plan_tensor_parallel(models::model_layers("mnist_cnn"), 200); },
                                {"200 ranks", "no layer can be split", "Dense(9216, 128)"}));
  layers::LayerList flattened;
  flattened.emplace_init<layers::Conv2d>(1, 8, layers::Conv2dOptions{})
      .emplace<layers::Flatten>()
      .emplace_init<layers::Dense>(8, 4, true);
  CHECK(throws_error_mentioning([&] { plan_tensor_parallel(flattened, 2); }, {"no layer can be split", "Flatten"}));
  CHECK(throws_error_mentioning([] { plan_tensor_parallel(models::model_layers("mnist_cnn"), 0); },
                                {"at least 1 rank", "0"}));
}

TEST_CASE("TensorPlan::pair_across: a pipeline stage may begin only where the activation is whole") {
  // mnist_cnn at 2 ranks: column 0 + row 2, column 7 + row 10.
  const TensorPlan cnn = plan_tensor_parallel(models::model_layers("mnist_cnn"), 2);
  for (const std::size_t layer : {0, 3, 4, 5, 6, 7}) {
    CAPTURE(layer);
    CHECK(cnn.pair_across(layer).empty());
  }
  CHECK(cnn.pair_across(1) == "column 0 + row 2");
  CHECK(cnn.pair_across(2) == "column 0 + row 2");
  for (const std::size_t layer : {8, 9, 10}) CHECK(cnn.pair_across(layer) == "column 7 + row 10");
  // resnet_small's pairs lie inside its blocks: every top-level boundary is whole.
  const TensorPlan resnet = plan_tensor_parallel(models::model_layers("resnet_small"), 2);
  for (std::size_t layer = 0; layer < resnet.layers; ++layer) CHECK(resnet.pair_across(layer).empty());
}
