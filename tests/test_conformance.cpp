// Device conformance: every op of core/ops.hpp, every layer's functional op
// and every optimizer update, forward and gradient, run on each device
// against cpu:0 on the same inputs (as ggml's test-backend-ops), so a device
// CI lacks is checked wherever one is present. The ops are two tables below:
// adding an op is adding one line.
//
// Built twice from this file:
// * into ddl_tests, covering the logical CPU devices cpu:1.. (ctest sets
//   DDL_CPU_DEVICES=2). They run the same code as cpu:0, so results must be
//   bitwise equal; this proves ops honour the device they are given.
// * as ddl_cuda_conformance (DDL_CONFORMANCE_CUDA), covering cuda:0.., with
//   its own main that prints "SKIPPED: no CUDA device (<reason>)" and exits
//   77 (ctest's SKIP_RETURN_CODE) when there is no GPU.
#ifdef DDL_CONFORMANCE_CUDA
#define DOCTEST_CONFIG_IMPLEMENT
#endif
#include <doctest/doctest.h>

#include <ddl/build_config.hpp>
#if defined(DDL_CONFORMANCE_CUDA) && DDL_WITH_CUDA_BUILD
#include <cuda_runtime.h>

#include <ddl/core/cuda/compute_mark.hpp>
#include <ddl/core/cuda/host_upload.hpp>
#include <ddl/core/cuda/runtime.hpp>
#include <ddl/core/cuda/staging.hpp>
#endif

#include <ddl/core/config.hpp>
#include <ddl/core/deferred_gradients.hpp>
#include <ddl/core/entry_points.hpp>
#include <ddl/core/kernels.hpp>
#include <ddl/ddl.hpp>
#include <ddl/layers/batchnorm2d.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/layer_kernels.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/layers/upsample2d.hpp>
#include <ddl/optim/update_kernels.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;

namespace {

using Inputs = const std::vector<Tensor>&;

// What values an op's inputs need for it to be smooth (see test_data.hpp).
// kTies: small integers, so windows and rows hold equal maxima (as ReLU
// outputs and integer images do), where a tie rule shows.
enum class Values { kAny, kPositive, kAwayFromZero, kDistinct, kTies };

struct OpCase {
  const char* name;
  std::vector<Shape> shapes;  // one per input, all float32
  Values values;
  std::function<Tensor(Inputs)> op;
};

// Batch norm with running statistics made on the input's device, so the
// case is self-contained: [N, C, H, W], gamma [C], beta [C].
Tensor batch_norm_case(Inputs x, bool training) {
  const std::int64_t channels = x[0].size(1);
  const TensorOptions options{DType::Float32, x[0].device(), false};
  const Tensor running_mean = full({channels}, 0.1, options), running_var = full({channels}, 2.0, options);
  return layers::batch_norm2d(x[0], x[1], x[2], running_mean, running_var, training);
}

// Three steps of an optimizer on a parameter made from x[0] with the fixed
// gradient x[1]: the update kernels (optim/update_kernels.hpp) on the device.
template <class Optimizer, class Options>
Tensor optimizer_steps(Inputs x, const Options& options) {
  const NoGradGuard no_grad;
  Tensor param = x[0].detach().clone().set_requires_grad();
  param.set_grad(x[1].detach().clone());
  Optimizer optimizer({param}, options);
  for (int step = 0; step < 3; ++step) optimizer.step();
  return param.detach();
}

// Every op and tensor method of the public API that takes tensors, with
// each layout its kernels treat differently (broadcast modes, batched GEMM
// paths, the multi-threaded sizes).
const std::vector<OpCase>& op_cases() {
  using V = Values;
  // One line per op.
  // clang-format off
  static const std::vector<OpCase> cases{
      {"add", {{3, 7}, {3, 7}}, V::kAny, [](Inputs x) { return add(x[0], x[1]); }},
      {"add [N, C] + [C]", {{5, 7}, {7}}, V::kAny, [](Inputs x) { return add(x[0], x[1]); }},
      {"add [N, C, H, W] + [C, 1, 1]", {{2, 3, 5, 7}, {3, 1, 1}}, V::kAny, [](Inputs x) { return x[0] + x[1]; }},
      {"add scalar operand", {{3, 7}, {}}, V::kAny, [](Inputs x) { return add(x[0], x[1]); }},
      {"add both broadcast", {{5, 1}, {1, 7}}, V::kAny, [](Inputs x) { return add(x[0], x[1]); }},
      {"sub", {{5, 7}, {7}}, V::kAny, [](Inputs x) { return sub(x[0], x[1]); }},
      {"mul", {{5, 7}, {5, 1}}, V::kAny, [](Inputs x) { return mul(x[0], x[1]); }},
      {"div", {{5, 7}, {7}}, V::kAwayFromZero, [](Inputs x) { return div(x[0], x[1]); }},
      {"add float", {{13}}, V::kAny, [](Inputs x) { return add(x[0], 1.5f); }},
      {"mul float", {{13}}, V::kAny, [](Inputs x) { return mul(x[0], -2.5f); }},
      {"operators with floats", {{13}}, V::kAny, [](Inputs x) { return (2.0f * x[0] - 1.0f) / 3.0f + (-x[0]); }},
      {"neg", {{3, 5}}, V::kAny, [](Inputs x) { return neg(x[0]); }},
      {"exp", {{3, 5}}, V::kAny, [](Inputs x) { return exp(x[0]); }},
      {"log", {{3, 5}}, V::kPositive, [](Inputs x) { return log(x[0]); }},
      {"sqrt", {{3, 5}}, V::kPositive, [](Inputs x) { return sqrt(x[0]); }},
      {"pow", {{3, 5}}, V::kPositive, [](Inputs x) { return pow(x[0], -1.5f); }},
      {"relu", {{3, 5}}, V::kAwayFromZero, [](Inputs x) { return relu(x[0]); }},
      {"abs", {{3, 5}}, V::kAwayFromZero, [](Inputs x) { return abs(x[0]); }},
      {"sigmoid", {{3, 5}}, V::kAny, [](Inputs x) { return sigmoid(x[0]); }},
      {"tanh", {{3, 5}}, V::kAny, [](Inputs x) { return tanh(x[0]); }},
      {"exp, multi-threaded size", {{1 << 16}}, V::kAny, [](Inputs x) { return exp(x[0]); }},
      // More elements than one grid-stride launch covers, so its loop loops.
      {"relu, grid-stride size", {{3 << 20}}, V::kAwayFromZero, [](Inputs x) { return relu(x[0]); }},
      {"mul broadcast, grid-stride size", {{3 << 10, 1 << 10}, {1 << 10}}, V::kAny,
       [](Inputs x) { return mul(x[0], x[1]); }},
      {"sum", {{7, 13}}, V::kAny, [](Inputs x) { return sum(x[0]); }},
      {"sum, chunked size", {{1 << 17}}, V::kAny, [](Inputs x) { return sum(x[0]); }},
      {"sum dim 0", {{7, 13, 3}}, V::kAny, [](Inputs x) { return sum(x[0], 0); }},
      {"sum dim -1 keepdim", {{7, 13, 3}}, V::kAny, [](Inputs x) { return sum(x[0], -1, true); }},
      {"mean", {{7, 13}}, V::kAny, [](Inputs x) { return mean(x[0]); }},
      {"mean dim 1", {{7, 13, 3}}, V::kAny, [](Inputs x) { return mean(x[0], 1); }},
      {"max dim 1 values", {{7, 13, 3}}, V::kDistinct, [](Inputs x) { return max(x[0], 1).values; }},
      {"max dim 0 keepdim indices", {{7, 13}}, V::kDistinct, [](Inputs x) { return max(x[0], 0, true).indices; }},
      {"argmax", {{7, 13}}, V::kDistinct, [](Inputs x) { return argmax(x[0], -1); }},
      {"argmax, ties", {{7, 13}}, V::kTies, [](Inputs x) { return argmax(x[0], -1); }},
      {"max dim 1 values, ties", {{7, 13, 3}}, V::kTies, [](Inputs x) { return max(x[0], 1).values; }},
      {"sum_to", {{5, 3, 7}}, V::kAny, [](Inputs x) { return sum_to(x[0], {3, 1}); }},
      {"expand", {{3, 1}}, V::kAny, [](Inputs x) { return expand(x[0], {5, 3, 7}); }},
      {"matmul 2-D", {{7, 13}, {13, 5}}, V::kAny, [](Inputs x) { return matmul(x[0], x[1]); }},
      {"matmul 2-D, empty inner dimension", {{3, 0}, {0, 4}}, V::kAny, [](Inputs x) { return matmul(x[0], x[1]); }},
      {"matmul batched, empty inner dimension", {{2, 3, 0}, {2, 0, 4}}, V::kAny,
       [](Inputs x) { return matmul(x[0], x[1]); }},
      {"matmul 2-D, blocked size", {{67, 61}, {61, 29}}, V::kAny, [](Inputs x) { return matmul(x[0], x[1]); }},
      {"matmul batched", {{3, 7, 5}, {3, 5, 2}}, V::kAny, [](Inputs x) { return matmul(x[0], x[1]); }},
      {"matmul batched @ 2-D", {{3, 7, 5}, {5, 2}}, V::kAny, [](Inputs x) { return matmul(x[0], x[1]); }},
      {"matmul batched @ 2-D, empty inner dimension", {{2, 3, 0}, {0, 4}}, V::kAny,
       [](Inputs x) { return matmul(x[0], x[1]); }},
      {"matmul 2-D @ batched", {{7, 5}, {3, 5, 2}}, V::kAny, [](Inputs x) { return matmul(x[0], x[1]); }},
      {"transpose", {{3, 7, 5}}, V::kAny, [](Inputs x) { return transpose(x[0]); }},
      {"softmax dim -1", {{7, 13}}, V::kAny, [](Inputs x) { return softmax(x[0], -1); }},
      {"softmax dim 0", {{7, 13}}, V::kAny, [](Inputs x) { return softmax(x[0], 0); }},
      {"log_softmax dim 1", {{3, 7, 5}}, V::kAny, [](Inputs x) { return log_softmax(x[0], 1); }},
      {"concat", {{2, 5}, {3, 5}, {1, 5}}, V::kAny, [](Inputs x) { return concat({x[0], x[1], x[2]}); }},
      {"slice", {{7, 5}}, V::kAny, [](Inputs x) { return slice(x[0], 2, 6); }},
      {"concat along dim 1", {{2, 3, 4}, {2, 5, 4}}, V::kAny, [](Inputs x) { return concat({x[0], x[1]}, 1); }},
      {"slice along the last dim", {{3, 4, 9}}, V::kAny, [](Inputs x) { return slice(x[0], 2, 7, -1); }},
      {"reshape", {{3, 7, 5}}, V::kAny, [](Inputs x) { return x[0].reshape({7, 15}) * x[0].reshape({7, 15}); }},
      {"flatten", {{3, 7, 5}}, V::kAny, [](Inputs x) { return tanh(x[0].flatten(1)); }},
      {"clone", {{3, 7}}, V::kAny, [](Inputs x) { return exp(x[0].clone()); }},
      {"detach", {{3, 7}}, V::kAny, [](Inputs x) { return x[0].detach() * x[0]; }},
      {"abs", {{3, 5}}, V::kAwayFromZero, [](Inputs x) { return abs(x[0]); }},
      // Layers (layers/): each kernel family and its awkward configurations.
      {"dense", {{7, 13}, {13, 5}, {5}}, V::kAny, [](Inputs x) { return layers::dense(x[0], x[1], x[2]); }},
      {"conv2d 3x3", {{2, 3, 9, 7}, {5, 3, 3, 3}, {5}}, V::kAny,
       [](Inputs x) { return layers::conv2d(x[0], x[1], x[2]); }},
      {"conv2d stride 2 padding 1", {{3, 2, 8, 9}, {4, 2, 3, 3}, {4}}, V::kAny,
       [](Inputs x) { return layers::conv2d(x[0], x[1], x[2], {.stride = 2, .padding = 1}); }},
      {"conv2d dilation 2, no bias", {{1, 3, 11, 10}, {2, 3, 3, 3}}, V::kAny,
       [](Inputs x) { return layers::conv2d(x[0], x[1], Tensor(), {.dilation = 2}); }},
      {"conv2d 2x5 kernel, padding 1", {{2, 3, 6, 9}, {4, 3, 2, 5}, {4}}, V::kAny,
       [](Inputs x) { return layers::conv2d(x[0], x[1], x[2], {.padding = 1}); }},
      {"conv2d 1 channel 5x5", {{7, 1, 12, 12}, {6, 1, 5, 5}, {6}}, V::kAny,
       [](Inputs x) { return layers::conv2d(x[0], x[1], x[2]); }},
      {"max_pool2d 2", {{2, 3, 8, 6}}, V::kDistinct, [](Inputs x) { return layers::max_pool2d(x[0], {}); }},
      {"max_pool2d 3 stride 2 padding 1", {{1, 2, 7, 9}}, V::kDistinct,
       [](Inputs x) { return layers::max_pool2d(x[0], {.kernel_size = 3, .stride = 2, .padding = 1}); }},
      {"max_pool2d 2, ties", {{2, 3, 8, 6}}, V::kTies, [](Inputs x) { return layers::max_pool2d(x[0], {}); }},
      {"max_pool2d 3 stride 2 padding 1, ties", {{2, 3, 9, 7}}, V::kTies,
       [](Inputs x) { return layers::max_pool2d(x[0], {.kernel_size = 3, .stride = 2, .padding = 1}); }},
      {"max_pool2d 2 of relu, ties at 0", {{2, 3, 8, 6}}, V::kAny,
       [](Inputs x) { return layers::max_pool2d(relu(x[0] - 0.5f), {}); }},
      {"avg_pool2d 2", {{2, 3, 8, 6}}, V::kAny, [](Inputs x) { return layers::avg_pool2d(x[0], {}); }},
      {"avg_pool2d 3 padding 1", {{1, 2, 7, 9}}, V::kAny,
       [](Inputs x) { return layers::avg_pool2d(x[0], {.kernel_size = 3, .stride = 1, .padding = 1}); }},
      {"max_pool2d 3 stride 2 ceil_mode", {{2, 3, 8, 7}}, V::kDistinct,
       [](Inputs x) { return layers::max_pool2d(x[0], {.kernel_size = 3, .stride = 2, .ceil_mode = true}); }},
      {"avg_pool2d 3 stride 2 padding 1, padding not counted", {{2, 3, 7, 9}}, V::kAny, [](Inputs x) {
         return layers::avg_pool2d(x[0], {.kernel_size = 3, .stride = 2, .padding = 1, .count_include_pad = false});
       }},
      {"avg_pool2d 3 stride 2 padding 1 ceil_mode, padding not counted", {{1, 2, 8, 6}}, V::kAny, [](Inputs x) {
         return layers::avg_pool2d(x[0], {.kernel_size = 3, .stride = 2, .padding = 1, .ceil_mode = true,
                                          .count_include_pad = false});
       }},
      {"batch_norm2d training", {{4, 3, 5, 7}, {3}, {3}}, V::kAny,
       [](Inputs x) { return batch_norm_case(x, true); }},
      {"batch_norm2d eval", {{4, 3, 5, 7}, {3}, {3}}, V::kAny, [](Inputs x) { return batch_norm_case(x, false); }},
      {"dropout (same seed, same mask)", {{7, 13}}, V::kAny,
       [](Inputs x) { Generator g(5); return layers::dropout(x[0], 0.4f, true, &g); }},
      {"dropout of a part (features 3-7 of 11)", {{7, 5}}, V::kAny,
       [](Inputs x) { Generator g(5); return layers::dropout_of_part(x[0], 0.4f, true, 1, 3, 11, &g); }},
      {"upsample_nearest2d 2", {{2, 3, 5, 7}}, V::kAny, [](Inputs x) { return layers::upsample_nearest2d(x[0], 2); }},
      {"upsample_nearest2d 3", {{1, 2, 3, 1}}, V::kAny, [](Inputs x) { return layers::upsample_nearest2d(x[0], 3); }},
      {"cross_entropy int64 labels", {{7, 5}}, V::kAny, [](Inputs x) {
         return layers::cross_entropy(x[0], from_vector(std::vector<std::int64_t>{0, 4, 2, 1, 3, 3, 0}, {7},
                                                        {DType::Int64, x[0].device(), false}));
       }},
      {"cross_entropy int32 labels, sum", {{5, 3}}, V::kAny, [](Inputs x) {
         return layers::cross_entropy(x[0], from_vector(std::vector<std::int32_t>{2, 0, 1, 1, 2}, {5},
                                                        {DType::Int32, x[0].device(), false}), layers::Reduction::Sum);
       }},
      {"cross_entropy int64 labels, no reduction", {{7, 5}}, V::kAny, [](Inputs x) {
         return layers::cross_entropy(x[0], from_vector(std::vector<std::int64_t>{0, 4, 2, 1, 3, 3, 0}, {7},
                                                        {DType::Int64, x[0].device(), false}), layers::Reduction::None);
       }},
      {"cross_entropy one-hot", {{2, 3}, {2, 3}}, V::kAny,
       [](Inputs x) { return layers::cross_entropy(x[0], softmax(x[1], 1)); }},
      {"mse_loss", {{7, 3}, {7, 3}}, V::kAny, [](Inputs x) { return layers::mse_loss(x[0], x[1]); }},
      {"mse_loss, no reduction", {{7, 3}, {7, 3}}, V::kAny,
       [](Inputs x) { return layers::mse_loss(x[0], x[1], layers::Reduction::None); }},
      {"mae_loss", {{7, 3}, {7, 3}}, V::kAwayFromZero, [](Inputs x) { return layers::mae_loss(x[0], x[1] * 0.1f); }},
      {"mae_loss, sum", {{7, 3}, {7, 3}}, V::kAwayFromZero,
       [](Inputs x) { return layers::mae_loss(x[0], x[1] * 0.1f, layers::Reduction::Sum); }},
      // Optimizer updates (optim/).
      {"SGD without momentum", {{5, 7}, {5, 7}}, V::kAny,
       [](Inputs x) { return optimizer_steps<optim::SGD>(x, optim::SgdOptions{.lr = 0.1}); }},
      {"SGD nesterov, weight decay", {{5, 7}, {5, 7}}, V::kAny, [](Inputs x) {
         return optimizer_steps<optim::SGD>(x, optim::SgdOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true,
                                                                 .weight_decay = 0.01});
       }},
      {"Adadelta", {{13}, {13}}, V::kAny, [](Inputs x) { return optimizer_steps<optim::Adadelta>(x, optim::AdadeltaOptions{}); }},
      {"Adagrad", {{13}, {13}}, V::kAny, [](Inputs x) { return optimizer_steps<optim::Adagrad>(x, optim::AdagradOptions{}); }},
      {"Adam", {{3, 5}, {3, 5}}, V::kAny, [](Inputs x) { return optimizer_steps<optim::Adam>(x, optim::AdamOptions{}); }},
  };
  // clang-format on
  return cases;
}

struct CreationCase {
  const char* name;
  std::function<Tensor(const Device&)> make;
};

TensorOptions on(const Device& device, DType dtype = DType::Float32) { return {dtype, device, false}; }

// Creation ops, including the random ones: the same seed must give the
// same numbers on every device.
const std::vector<CreationCase>& creation_cases() {
  // One line per op.
  // clang-format off
  static const std::vector<CreationCase> cases{
      {"zeros", [](const Device& d) { return zeros({3, 5}, on(d)); }},
      {"ones int32", [](const Device& d) { return ones({7}, on(d, DType::Int32)); }},
      {"full int64", [](const Device& d) { return full({2, 3}, -4.0, on(d, DType::Int64)); }},
      {"full float32", [](const Device& d) { return full({1 << 16}, 0.25, on(d)); }},
      {"arange float32", [](const Device& d) { return arange(13, on(d)); }},
      {"arange int32", [](const Device& d) { return arange(13, on(d, DType::Int32)); }},
      {"arange int64", [](const Device& d) { return arange(13, on(d, DType::Int64)); }},
      {"from_vector int32", [](const Device& d) { return from_vector(std::vector<std::int32_t>{1, -2, 3}, {3}, on(d)); }},
      {"uniform", [](const Device& d) { Generator g(7); return uniform({1 << 16}, -2.0f, 3.0f, on(d), &g); }},
      {"normal", [](const Device& d) { Generator g(8); return normal({1 << 16}, 1.0f, 2.0f, on(d), &g); }},
  };
  // clang-format on
  return cases;
}

// Logical CPU devices run cpu:0's code and must agree bitwise; a GPU has its
// own GEMM, reduction order and libm, so it gets float32 headroom.
struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance_for(const Device& device) { return device.is_cpu() ? Tolerance{0.0, 0.0} : Tolerance{1e-5, 1e-4}; }

Tensor round_to_integers(const Tensor& values) {
  std::vector<float> rounded = values.to_vector<float>();
  for (float& value : rounded) value = std::nearbyint(value);
  return from_vector(rounded, values.shape());
}

Tensor make_input(const Shape& shape, Values values, std::uint64_t seed) {
  Generator generator(seed);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  switch (values) {
    case Values::kPositive:
      return test::positive_tensor(shape, generator);
    case Values::kAwayFromZero:
      return test::away_from_zero_tensor(shape, generator);
    case Values::kDistinct:
      return test::distinct_tensor(shape, rng);
    case Values::kTies:
      return round_to_integers(test::uniform_tensor(shape, generator, -2.0f, 2.0f));
    case Values::kAny:
      break;
  }
  return test::uniform_tensor(shape, generator);
}

struct Run {
  Tensor output;
  std::vector<Tensor> grads;  // undefined where no gradient flowed
};

// Runs the op on copies of `inputs` moved to `device`, then backward of
// sum(output * w) with the same weights w for every device. With
// `absolute`, on |inputs| and from |w|: for an op of sums of products
// (matmul, convolution) every term then adds with its sign dropped, so each
// result is the sum of the magnitudes of its terms.
Run run_on(const Device& device, const OpCase& op_case, const std::vector<Tensor>& inputs, std::uint64_t seed,
           bool absolute = false) {
  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs) {
    leaves.push_back((absolute ? abs(input) : input).to(device).detach().clone().set_requires_grad());
  }
  Run run{op_case.op(leaves), {}};
  if (run.output.dtype() == DType::Float32 && run.output.requires_grad()) {
    Generator generator(seed);
    const Tensor weights = uniform(run.output.shape(), -1.0f, 1.0f, {}, &generator).to(device);
    sum(run.output * (absolute ? abs(weights) : weights)).backward();
  }
  for (const Tensor& leaf : leaves) run.grads.push_back(leaf.grad());
  return run;
}

// Compares two results of the same dtype copied to the host.
test::Comparison compare(const Tensor& actual, const Tensor& expected, Tolerance tolerance) {
  if (actual.defined() != expected.defined()) {
    return {false, std::string("one result is undefined: actual ") + (actual.defined() ? "defined" : "undefined")};
  }
  if (!actual.defined()) return {};
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype()) {
    return {false, "actual " + actual.shape().str() + " " + std::string(dtype_name(actual.dtype())) + ", expected " +
                       expected.shape().str() + " " + std::string(dtype_name(expected.dtype()))};
  }
  switch (expected.dtype()) {
    case DType::Float32:
      return all_close(actual, expected, tolerance.atol, tolerance.rtol);
    case DType::Int32:
      return {actual.to_vector<std::int32_t>() == expected.to_vector<std::int32_t>(), "int32 values differ"};
    case DType::Int64:
      return {actual.to_vector<std::int64_t>() == expected.to_vector<std::int64_t>(), "int64 values differ"};
  }
  return {false, "unknown dtype"};
}

// With `roundoff_units` > 0 (an op of sums of products), each element may
// also differ by that many units of float32's roundoff (2^-24) of the sum
// of its terms' magnitudes.
void check_op_case(const OpCase& op_case, const Device& device, std::uint64_t seed, double roundoff_units = 0.0) {
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < op_case.shapes.size(); ++i) {
    inputs.push_back(make_input(op_case.shapes[i], op_case.values, seed + i));
  }
  const Run expected = run_on(cpu(0), op_case, inputs, seed);
  const Run actual = run_on(device, op_case, inputs, seed);
  const Tolerance tolerance = tolerance_for(device);
  std::optional<Run> magnitudes;
  if (roundoff_units > 0.0) magnitudes = run_on(cpu(0), op_case, inputs, seed, true);
  const auto check = [&](const Tensor& result, const Tensor& reference, const Tensor* magnitude) {
    if (magnitude == nullptr || !reference.defined()) return compare(result, reference, tolerance);
    std::vector<double> allowed;
    for (const float m : magnitude->to_vector<float>()) allowed.push_back(roundoff_units * std::ldexp(m, -24));
    return test::all_close(result.to_vector<float>(), reference.to_vector<float>(), tolerance.atol, tolerance.rtol,
                           allowed);
  };
  CHECK(actual.output.device() == device);
  CHECK_MESSAGE(check(actual.output, expected.output, magnitudes ? &magnitudes->output : nullptr), "output");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    CAPTURE(i);
    if (actual.grads[i].defined()) CHECK(actual.grads[i].device() == device);
    CHECK_MESSAGE(check(actual.grads[i], expected.grads[i], magnitudes ? &magnitudes->grads[i] : nullptr),
                  "gradient of input ", i);
  }
}

std::vector<Device> devices_under_test() {
  std::vector<Device> devices;
  for (const Device& device : available_devices()) {
#ifdef DDL_CONFORMANCE_CUDA
    if (device.is_cuda()) devices.push_back(device);
#else
    if (device.is_cpu() && device.index() != 0) devices.push_back(device);
#endif
  }
  return devices;
}

#ifdef DDL_CONFORMANCE_CUDA
constexpr const char* kKind = "CUDA";
#else
constexpr const char* kKind = "logical CPU";
#endif

// Whether each table has run in this process (coverage needs both).
bool op_cases_ran = false, creation_cases_ran = false;

void check_all_op_cases() {
  op_cases_ran = true;
  const std::vector<Device> devices = devices_under_test();
  REQUIRE_MESSAGE(!devices.empty(), "no ", std::string(kKind),
                  " device besides cpu:0 (for CPU, run with DDL_CPU_DEVICES=2)");
  for (const Device& device : devices) {
    std::uint64_t seed = 1000;
    for (const OpCase& op_case : op_cases()) {
      INFO("op \"", std::string(op_case.name), "\" on ", device.str(), " vs cpu:0");
      try {
        check_op_case(op_case, device, seed);
      } catch (const std::exception& error) {
        FAIL_CHECK("threw: ", std::string(error.what()));
      }
      seed += 10;
    }
  }
}

void check_all_creation_cases() {
  creation_cases_ran = true;
  const std::vector<Device> devices = devices_under_test();
  REQUIRE_MESSAGE(!devices.empty(), "no ", std::string(kKind),
                  " device besides cpu:0 (for CPU, run with DDL_CPU_DEVICES=2)");
  for (const Device& device : devices) {
    for (const CreationCase& creation : creation_cases()) {
      INFO("creation \"", std::string(creation.name), "\" on ", device.str(), " vs cpu:0");
      try {
        const Tensor actual = creation.make(device);
        CHECK(actual.device() == device);
        CHECK(compare(actual, creation.make(cpu(0)), tolerance_for(device)));
      } catch (const std::exception& error) {
        FAIL_CHECK("threw: ", std::string(error.what()));
      }
    }
  }
}

// Every entry point of a backend (core/entry_points.hpp) a device must run:
// the kernels of the three lists, by their listed names, the library calls
// by their op names, and the copies a device of its kind makes alone (a
// copy between GPUs has its own case, and needs two).
std::vector<std::string> every_entry_point(const Device& device) {
#define DDL_NAME_OF(Kernel) #Kernel,
  std::vector<std::string> names{DDL_CORE_KERNELS(DDL_NAME_OF) DDL_LAYER_KERNELS(DDL_NAME_OF)
                                     DDL_OPTIM_KERNELS(DDL_NAME_OF) "gemm",
                                 "sum_all",
                                 "fill_zero",
                                 "conv2d",
                                 "conv2d backward",
                                 "batch_norm2d training",
                                 "batch_norm2d backward",
                                 "batch_norm2d inference",
                                 "max_pool2d",
                                 "max_pool2d backward",
                                 "avg_pool2d",
                                 "avg_pool2d backward"};
#undef DDL_NAME_OF
  if (device.is_cpu()) {
    names.emplace_back("copy between host buffers");
  } else {
    names.insert(names.end(), {"copy host to device", "copy device to host", "copy within a device"});
  }
  return names;
}

// The tables (run here if they have not run yet) ran every entry point on
// each device under test, and nothing this test does not know of: an entry
// point added without a case fails here, by name.
void check_entry_point_coverage() {
  if (!op_cases_ran) check_all_op_cases();
  if (!creation_cases_ran) check_all_creation_cases();
  for (const Device& device : devices_under_test()) {
    const std::vector<std::string> expected = every_entry_point(device);
    const std::vector<std::string> run = backend::entry_points_run(device);
    const auto has = [](const std::vector<std::string>& names, const std::string& name) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    for (const std::string& name : expected) {
      CHECK_MESSAGE(has(run, name), name, " never ran on ", device.str(), ": add a case that runs it");
    }
    for (const std::string& name : run) {
      // Only a peer copy (the 2-GPU case) may run beyond the list.
      if (name == "copy between devices") continue;
      CHECK_MESSAGE(has(expected, name), name, " ran on ", device.str(),
                    " but is not in every_entry_point: add it there, and a case that runs it");
    }
  }
}

// Deferred weight gradients (core/deferred_gradients.hpp) join the parts'
// rows on the device and make one GEMM (or a convolution's one
// backward-weights pass) there, as on cpu:0.
void check_deferred_weight_gradients() {
  const std::vector<Device> devices = devices_under_test();
  REQUIRE_MESSAGE(!devices.empty(), "no ", std::string(kKind),
                  " device besides cpu:0 (for CPU, run with DDL_CPU_DEVICES=2)");
  const std::vector<std::int64_t> part_rows{5, 1, 12};
  std::vector<Tensor> xs, gradients;
  for (std::size_t p = 0; p < part_rows.size(); ++p) {
    xs.push_back(make_input({part_rows[p], 37}, Values::kAny, 600 + p));
    gradients.push_back(make_input({part_rows[p], 19}, Values::kAny, 700 + p));
  }
  const Tensor weight = make_input({37, 19}, Values::kAny, 800);
  const auto deferred_gradient = [&](const Device& device) {
    const Tensor leaf = weight.to(device).detach().clone().set_requires_grad();
    autograd::DeferredWeightGradients deferred({leaf});
    for (std::size_t p = 0; p < part_rows.size(); ++p) {
      deferred.backward_inputs(matmul(xs[p].to(device), leaf), gradients[p].to(device), p);
    }
    // Kept, not computed, until the backward for the weights.
    CHECK(deferred.weights() == 1);
    CHECK_FALSE(leaf.grad().defined());
    deferred.backward_weights();
    return leaf.grad();
  };
  // A convolution's weight and bias, from parts of 2, 1 and 3 images joined
  // on the device for one backward-weights pass (cuDNN's on a GPU).
  const std::vector<std::int64_t> part_images{2, 1, 3};
  std::vector<Tensor> images, image_gradients;
  for (std::size_t p = 0; p < part_images.size(); ++p) {
    images.push_back(make_input({part_images[p], 3, 9, 7}, Values::kAny, 900 + p));
    image_gradients.push_back(make_input({part_images[p], 5, 5, 4}, Values::kAny, 950 + p));
  }
  const Tensor filters = make_input({5, 3, 3, 3}, Values::kAny, 990), bias = make_input({5}, Values::kAny, 991);
  const auto deferred_conv_gradients = [&](const Device& device) {
    const Tensor w = filters.to(device).detach().clone().set_requires_grad();
    const Tensor b = bias.to(device).detach().clone().set_requires_grad();
    autograd::DeferredWeightGradients deferred({w, b});
    for (std::size_t p = 0; p < part_images.size(); ++p) {
      deferred.backward_inputs(layers::conv2d(images[p].to(device), w, b, {.stride = 2, .padding = 1}),
                               image_gradients[p].to(device), p);
    }
    CHECK(deferred.weights() == 1);
    CHECK_FALSE(w.grad().defined());
    CHECK_FALSE(b.grad().defined());
    deferred.backward_weights();
    return std::vector{w.grad(), b.grad()};
  };
  const Tensor expected = deferred_gradient(cpu(0));
  const std::vector<Tensor> expected_conv = deferred_conv_gradients(cpu(0));
  for (const Device& device : devices) {
    INFO("on ", device.str());
    const Tensor actual = deferred_gradient(device);
    REQUIRE(actual.defined());
    CHECK(actual.device() == device);
    CHECK_MESSAGE(compare(actual, expected, tolerance_for(device)), "deferred weight gradient");
    const std::vector<Tensor> conv = deferred_conv_gradients(device);
    for (std::size_t i = 0; i < conv.size(); ++i) {
      REQUIRE(conv[i].defined());
      CHECK(conv[i].device() == device);
      const char* what = i == 0 ? "deferred convolution weight gradient" : "deferred convolution bias gradient";
      CHECK_MESSAGE(compare(conv[i], expected_conv[i], tolerance_for(device)), what);
    }
  }
}

}  // namespace

#ifdef DDL_CONFORMANCE_CUDA

TEST_CASE("conformance: every op and its gradient on each CUDA device match cpu:0") { check_all_op_cases(); }
TEST_CASE("conformance: creation ops on each CUDA device match cpu:0") { check_all_creation_cases(); }
TEST_CASE("conformance: deferred weight gradients on each CUDA device match cpu:0") {
  check_deferred_weight_gradients();
}

// Sizes where cuDNN's heuristics offer atomics-based backward algorithms.
const OpCase kLargerConv{"conv2d 3x3 padding 1, 32x16x28x28", {{32, 16, 28, 28}, {32, 16, 3, 3}, {32}}, Values::kAny,
                         [](Inputs x) { return layers::conv2d(x[0], x[1], x[2], {.padding = 1}); }};

// A run must repeat itself bit for bit (the default is deterministic).
TEST_CASE("conformance: conv2d forward and backward on each CUDA device repeat bit for bit") {
  const OpCase& conv = kLargerConv;
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < conv.shapes.size(); ++i) {
    inputs.push_back(make_input(conv.shapes[i], conv.values, 77 + i));
  }
  for (const Device& device : devices_under_test()) {
    INFO("on ", device.str());
    const Run first = run_on(device, conv, inputs, 5), second = run_on(device, conv, inputs, 5);
    CHECK_MESSAGE(compare(second.output, first.output, {0.0, 0.0}), "output");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      CHECK_MESSAGE(compare(second.grads[i], first.grads[i], {0.0, 0.0}), "gradient of input ", i);
    }
  }
}

// The other choices of algorithm compute the same convolutions: cuDNN's
// heuristic's first, and the fastest by cuDNN's own timing at a shape's
// first use (which runs every algorithm on scratch tensors first). These
// may be Winograd's or FFT's, which round in their transforms too: their
// error scales with the magnitudes of the terms a result sums, not with the
// result, which cancellation can make small (on an H200 the 32x16x28x28
// case's worst output was 1.2e-5 off at 0.0099, beyond the direct
// algorithms' 1e-5 + 1e-4 |x|). So each element may also be off by 32
// units of roundoff of its terms' magnitudes: far below a wrong result's
// error, which is of the order of the magnitudes themselves.
TEST_CASE("conformance: conv2d with DDL_CUDA_CONV=fastest and =benchmark on each CUDA device matches cpu:0") {
  const config::CudaConvolution previous = config::cuda_convolution();
  struct Restore {
    config::CudaConvolution algorithms;
    ~Restore() { set_cuda_convolution(algorithms); }
  } restore{previous};
  std::vector<OpCase> convolutions{kLargerConv};
  for (const OpCase& op_case : op_cases()) {
    if (std::string_view(op_case.name).starts_with("conv2d")) convolutions.push_back(op_case);
  }
  for (const config::CudaConvolution algorithms :
       {config::CudaConvolution::Fastest, config::CudaConvolution::Benchmark}) {
    set_cuda_convolution(algorithms);
    for (const Device& device : devices_under_test()) {
      std::uint64_t seed = 500;
      for (const OpCase& op_case : convolutions) {
        INFO("op \"", std::string(op_case.name), "\" on ", device.str(), " with DDL_CUDA_CONV=",
             std::string(algorithms == config::CudaConvolution::Fastest ? "fastest" : "benchmark"));
        check_op_case(op_case, device, seed += 10, 32.0);
      }
    }
  }
}

// A copy between GPUs reads its source after the source tensor is gone:
// the source's block must not be handed out again (and overwritten) before
// the copy has read it. Repeated, with large sizes, so a race would show.
TEST_CASE("conformance: a copy between GPUs is not overwritten by the source GPU's next allocation") {
  const int gpus = device_count(DeviceType::CUDA);
  if (gpus < 2) {
    MESSAGE("needs 2 GPUs; this machine has ", gpus);
    return;
  }
  const std::int64_t n = std::int64_t{1} << 24;
  for (int round = 0; round < 5; ++round) {
    CAPTURE(round);
    Tensor copied;
    {
      const Tensor source = full({n}, 1.0 + round, on(cuda(0)));
      copied = source.to(cuda(1));
    }  // the source's block goes back to cuda:0's cache here
    const Tensor reuse = full({n}, -7.0, on(cuda(0)));  // likely the same block
    const std::vector<float> values = copied.to_vector<float>();
    CHECK(std::all_of(values.begin(), values.end(), [&](float v) { return v == 1.0f + static_cast<float>(round); }));
    CHECK(reuse.to_vector<float>().back() == -7.0f);
  }
}

// Elementwise kernels index with 64 bits: a tensor past 2^31 elements is
// computed to its end (2 x 8.6 GB on the GPU; the GPU machines have that).
TEST_CASE("conformance: a tensor of more than 2^31 elements is computed to its last element") {
  const std::int64_t n = (std::int64_t{1} << 31) + 5;
  const Tensor doubled = full({n}, 1.5, on(cuda(0))) * 2.0f;
  CHECK(slice(doubled, n - 7, n).to_vector<float>() == std::vector<float>(7, 3.0f));
  CHECK(slice(doubled, 0, 3).to_vector<float>() == std::vector<float>(3, 3.0f));
}

#if DDL_WITH_CUDA_BUILD
// The caching allocator: a request that fits only once the cached blocks
// are given back succeeds (they are released and the allocation retried);
// empty_cache() leaves nothing cached; a request no GPU could hold is an
// error naming the device and the size.
TEST_CASE("conformance: out of GPU memory, the allocator releases its cache and retries, empty_cache empties it") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  std::size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  const auto floats = [](double bytes) { return static_cast<std::int64_t>(bytes / sizeof(float)); };
  {
    const Tensor cached = Tensor::empty({floats(0.55 * static_cast<double>(free_bytes))}, on(cuda(0)));
  }  // its block stays in the cache
  CHECK(memory_stats(cuda(0)).bytes_cached >= static_cast<std::size_t>(0.55 * static_cast<double>(free_bytes)));
  {
    // Larger than the cached block, and too large for what the driver has
    // left beside it: only a released cache makes room.
    const Tensor larger = Tensor::empty({floats(0.6 * static_cast<double>(free_bytes))}, on(cuda(0)));
    CHECK(larger.numel() == floats(0.6 * static_cast<double>(free_bytes)));
  }
  empty_cache();
  CHECK(memory_stats(cuda(0)).bytes_cached == 0);
  const std::int64_t impossible = floats(2.0 * static_cast<double>(total_bytes));
  CHECK(test::throws_error_mentioning([&] { (void)Tensor::empty({impossible}, on(cuda(0))); },
                                      {"out of memory on cuda:0"}));
}

// The device each thread has current after ddl's work (DeviceGuard): the
// first GPU a thread computes on stays current, so a rank never touches GPU
// 0 unless it uses it; a later guard for another GPU restores that one; and
// a device the thread chose itself is restored too.
TEST_CASE("conformance: a thread stays on the first GPU it computes on, and ddl restores what it changes") {
  // Runs `body` on a new thread, as a communication thread would be; an
  // exception there is returned, not thrown across the thread.
  const auto on_new_thread = [](const std::function<void()>& body) {
    std::string failure;
    std::thread([&] {
      try {
        body();
      } catch (const std::exception& error) {
        failure = error.what();
      }
    }).join();
    return failure;
  };
  const auto current = [] {
    int device = -1;
    return cudaGetDevice(&device) == cudaSuccess ? device : -1;
  };
  const auto compute_on = [](int device) { (void)sum(ones({3}, on(cuda(device)))).item<float>(); };
  const int gpus = device_count(DeviceType::CUDA);
  for (int home = 0; home < gpus; ++home) {
    INFO("first on cuda:", home, " of ", gpus);
    std::vector<int> seen;
    CHECK(on_new_thread([&] {
            compute_on(home);
            seen.push_back(current());
            compute_on((home + 1) % gpus);
            seen.push_back(current());
          }) == "");
    CHECK(seen == std::vector<int>{home, home});
  }
  if (gpus < 2) {
    MESSAGE("restoring a device the thread chose itself needs 2 GPUs; this machine has ", gpus);
    return;
  }
  int after = -1;
  CHECK(on_new_thread([&] {
          if (cudaSetDevice(1) != cudaSuccess) throw std::runtime_error("cudaSetDevice(1) failed");
          compute_on(0);
          after = current();
        }) == "");
  CHECK(after == 1);
}

// DataParallel's path for a GPU bucket reduced over MPI: the download waits
// for the point its writers marked, with products queued before the last
// writer, so a download that did not wait would read what the block held
// before; each download needs a mark of its own; an upload is seen by the
// compute queued after it.
TEST_CASE("conformance: a staging buffer's download waits for its ComputeMark, and its upload precedes later compute") {
  const std::int64_t n = (std::int64_t{1} << 22) + 3;
  cuda_backend::StagingBuffer staging(0, static_cast<std::size_t>(n) * sizeof(float));
  cuda_backend::ComputeMark written(0);
  const std::span<float> host(static_cast<float*>(staging.host()), static_cast<std::size_t>(n));
  const Tensor square = ones({1024, 1024}, on(cuda(0)));
  for (int round = 1; round <= 3; ++round) {
    CAPTURE(round);
    for (int i = 0; i < 4; ++i) (void)matmul(square, square);  // 2 GFLOP each, queued faster than they run
    const Tensor region = (arange(n, on(cuda(0))) + 1.0f) * static_cast<float>(round);
    written.record();
    // Whether this round tested the wait: the GPU was still busy.
    WARN(cudaStreamQuery(cuda_backend::stream(0).handle) == cudaErrorNotReady);
    staging.download(region.raw_data(), written);
    // Integers below 2^24: exact in float32.
    CHECK(host.front() == static_cast<float>(round));
    CHECK(host[12345] == 12346.0f * static_cast<float>(round));
    CHECK(host.back() == static_cast<float>(n) * static_cast<float>(round));
    CHECK(test::throws_error_mentioning([&] { staging.download(region.raw_data(), written); },
                                        {"ComputeMark on cuda:0", "record()"}));
    std::fill(host.begin(), host.end(), -static_cast<float>(round));
    const Tensor target = Tensor::empty({n}, on(cuda(0)));
    staging.upload(target.raw_data());
    CHECK(sum(target).item<float>() == -static_cast<float>(round) * static_cast<float>(n));
  }
}

// Holds a device's compute stream at a host function until open() (or a
// 30 s watchdog): the GPU work queued behind it waits however fast the GPU
// is, which makes "the host did not wait for the GPU" checkable.
class StreamGate {
 public:
  explicit StreamGate(int device) : device_(device) {
    REQUIRE(cudaLaunchHostFunc(cuda_backend::stream(device).handle, &StreamGate::hold, this) == cudaSuccess);
  }
  ~StreamGate() {  // never leaves the stream held
    open();
    (void)cudaStreamSynchronize(cuda_backend::stream(device_).handle);
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  void open() {
    const std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  bool is_open() {
    const std::lock_guard lock(mutex_);
    return open_;
  }
  bool timed_out() {
    const std::lock_guard lock(mutex_);
    return timed_out_;
  }
  // Opens the gate `delay` from now, on a thread of its own.
  std::jthread open_after(std::chrono::milliseconds delay) {
    return std::jthread([this, delay] {
      std::this_thread::sleep_for(delay);
      open();
    });
  }

 private:
  // Runs on CUDA's callback thread, which may call no CUDA function.
  static void CUDART_CB hold(void* self) {
    auto& gate = *static_cast<StreamGate*>(self);
    std::unique_lock lock(gate.mutex_);
    if (!gate.changed_.wait_for(lock, std::chrono::seconds(30), [&] { return gate.open_; })) {
      gate.timed_out_ = gate.open_ = true;
    }
  }

  int device_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
  bool timed_out_ = false;
};

// Every Tensor::to(cuda) and copy_from a host tensor goes through the ring
// of page-locked chunks of host_upload.hpp: it returns once the source is
// read, while the GPU has not reached the copy, and compute queued after it
// sees the values. With the stream held: copies that fit the ring return at
// once; a copy past the ring waits until the GPU has sent its oldest chunk
// (had it not, the chunk would be overwritten before being sent); every
// source is overwritten as soon as its copy returns; two threads at once.
TEST_CASE("conformance: a copy from the host returns before the GPU is done, having read its source") {
  constexpr auto chunk = static_cast<std::int64_t>(cuda_backend::kUploadChunkBytes / sizeof(float));
  Generator generator(11);
  std::vector<Tensor> uploaded;
  std::vector<std::vector<float>> expected;
  const auto upload = [&](std::int64_t n) {
    const Tensor host = test::uniform_tensor({n}, generator);
    expected.push_back(host.to_vector<float>());
    uploaded.push_back(host.to(cuda(0)));
    std::fill_n(host.data<float>(), n, -9.0f);  // too late to change what was copied
  };
  const auto check_uploaded = [&] {
    for (std::size_t k = 0; k < uploaded.size(); ++k) {
      CAPTURE(uploaded[k].numel());
      CHECK(uploaded[k].to_vector<float>() == expected[k]);
    }
    uploaded.clear();
    expected.clear();
  };
  // One chunk each, kUploadChunks in all: the ring holds them.
  static_assert(cuda_backend::kUploadChunks == 4);
  const std::vector<std::int64_t> fitting{1, 3, chunk - 1, chunk};
  {
    // Made before the stream is held, in case making them waits for it: the
    // ring (at the first copy) and the GPU blocks (cached once freed).
    (void)ones({1}).to(cuda(0));
    std::vector<Tensor> blocks;
    for (const std::int64_t n : fitting) blocks.push_back(Tensor::empty({n}, on(cuda(0))));
  }
  {
    StreamGate gate(0);
    for (const std::int64_t n : fitting) upload(n);
    CHECK_FALSE(gate.is_open());  // every copy returned with the GPU held before it
    gate.open();
    check_uploaded();
    CHECK_FALSE(gate.timed_out());
  }
  {
    StreamGate gate(0);
    const std::jthread opener = gate.open_after(std::chrono::milliseconds(200));
    for (const std::int64_t n : {chunk + 1, 3 * chunk + 5, 2 * cuda_backend::kUploadChunks * chunk + 7}) upload(n);
    CHECK(gate.is_open());  // the ring was full: the copy waited for the GPU
    check_uploaded();
    CHECK_FALSE(gate.timed_out());
  }

  // Two threads copying to one GPU take turns in the ring, past its size,
  // while the stream is held for a while; each copy keeps its own values.
  const auto upload_many = [&](float base, std::vector<Tensor>& out) {
    for (int i = 0; i < 12; ++i) out.push_back(full({chunk + 17 * i}, base + static_cast<float>(i)).to(cuda(0)));
  };
  std::vector<Tensor> first, second;
  std::string failure;
  {
    StreamGate gate(0);
    const std::jthread opener = gate.open_after(std::chrono::milliseconds(100));
    const std::jthread other([&] {
      try {
        upload_many(100.0f, second);
      } catch (const std::exception& error) {
        failure = error.what();
      }
    });
    upload_many(0.0f, first);
  }
  REQUIRE(failure == "");
  const auto holds_only = [](const Tensor& tensor, float value) {
    const std::vector<float> values = tensor.to_vector<float>();
    return std::all_of(values.begin(), values.end(), [&](float v) { return v == value; });
  };
  for (std::size_t i = 0; i < 12; ++i) {
    CAPTURE(i);
    CHECK(holds_only(first[i], static_cast<float>(i)));
    CHECK(holds_only(second[i], 100.0f + static_cast<float>(i)));
  }
}
#endif

// Last in the file, so that doctest (which runs cases in file order) has run
// the tables before it.
TEST_CASE("conformance: the cases ran every kernel, library call and copy on each CUDA device") {
  check_entry_point_coverage();
}

int main(int argc, char** argv) {
  if (!cuda_available()) {
    std::string reason = "unknown reason";
    try {
      check_device_exists(cuda(0));
    } catch (const Error& error) {
      reason = error.what();
    }
    std::cout << "SKIPPED: no CUDA device (" << reason << ")" << std::endl;
    return 77;  // ctest: SKIP_RETURN_CODE
  }
  doctest::Context context(argc, argv);
  return context.run();
}

#else

TEST_CASE("conformance: every op and its gradient on each logical CPU device match cpu:0") { check_all_op_cases(); }
TEST_CASE("conformance: creation ops on each logical CPU device match cpu:0") { check_all_creation_cases(); }
TEST_CASE("conformance: deferred weight gradients on each logical CPU device match cpu:0") {
  check_deferred_weight_gradients();
}
TEST_CASE("conformance: the cases ran every kernel, library call and copy on each logical CPU device") {
  check_entry_point_coverage();
}

#endif
