// Deferred weight gradients (core/deferred_gradients.hpp): backward in two
// halves, matmul's weight gradient kept as rows during several passes of
// backward_inputs and computed once by backward_weights.
#include <doctest/doctest.h>

#include <ddl/core/deferred_gradients.hpp>
#include <ddl/ddl.hpp>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "support/test_data.hpp"

using namespace ddl;
using autograd::DeferredWeightGradients;
using ddl::test::uniform_tensor;
using ddl::test::within_dot_product_bound;

namespace {

// A batch of `rows` rows of x [rows, in] and of the output's gradient
// g [rows, out], cut into parts of the given row counts.
struct Batch {
  std::vector<Tensor> xs, gradients;
};

Batch random_batch(const std::vector<std::int64_t>& part_rows, std::int64_t in, std::int64_t out,
                   Generator& generator) {
  Batch batch;
  for (const std::int64_t rows : part_rows) {
    batch.xs.push_back(uniform_tensor({rows, in}, generator));
    batch.gradients.push_back(uniform_tensor({rows, out}, generator));
  }
  return batch;
}

Tensor weight_leaf(std::int64_t in, std::int64_t out, Generator& generator) {
  Tensor weight = uniform_tensor({in, out}, generator);
  weight.set_requires_grad(true);
  return weight;
}

// Whether `gradient` is within float32's bound of the float64 sum of
// x_pᵀ g_p over the batch's parts (within_dot_product_bound).
void check_against_float64(const Tensor& gradient, const Batch& batch, std::int64_t in, std::int64_t out) {
  std::vector<double> expected(static_cast<std::size_t>(in * out), 0.0), magnitude(expected.size(), 0.0);
  std::int64_t terms = 0;
  for (std::size_t p = 0; p < batch.xs.size(); ++p) {
    terms += batch.xs[p].size(0);
    ddl::test::add_weight_gradient_reference(batch.xs[p], batch.gradients[p], expected, magnitude);
  }
  double worst = 0.0;
  const bool within = within_dot_product_bound(gradient, expected, magnitude, terms, &worst);
  CAPTURE(worst);
  CHECK(within);
}

// Backward of x @ weight for part p: for the inputs only into `deferred`
// if given, else a plain backward.
void part_backward(const Batch& batch, std::size_t p, const Tensor& weight, DeferredWeightGradients* deferred) {
  const Tensor y = matmul(batch.xs[p], weight);
  if (deferred != nullptr) {
    deferred->backward_inputs(y, batch.gradients[p], p);
  } else {
    y.backward(batch.gradients[p]);
  }
}

}  // namespace

TEST_CASE("deferred weight gradients: one product over every part's rows, within float32's bound of the float64 sum") {
  Generator generator(901);
  // Uneven parts of awkward sizes, one of a single row.
  const std::vector<std::int64_t> part_rows{3, 1, 7, 2};
  const std::int64_t in = 13, out = 5;
  const Batch batch = random_batch(part_rows, in, out, generator);
  const Tensor weight = weight_leaf(in, out, generator);

  DeferredWeightGradients deferred({weight});
  for (std::size_t p = 0; p < part_rows.size(); ++p) part_backward(batch, p, weight, &deferred);
  // Nothing reached .grad yet: the rows are kept.
  CHECK_FALSE(weight.grad().defined());
  CHECK(deferred.weights() == 1);
  CHECK(deferred.bytes() == static_cast<std::size_t>(13 * (in + out)) * sizeof(float));

  deferred.backward_weights();
  CHECK(deferred.weights() == 0);
  CHECK(deferred.bytes() == 0);
  REQUIRE(weight.grad().defined());
  CHECK(weight.grad().shape() == Shape{in, out});
  check_against_float64(weight.grad(), batch, in, out);
}

TEST_CASE("deferred weight gradients: with one part, the product backward computes, bit for bit") {
  Generator generator(902);
  const Batch batch = random_batch({7}, 13, 3, generator);
  const Tensor weight = weight_leaf(13, 3, generator);
  part_backward(batch, 0, weight, nullptr);
  const std::vector<float> immediate = weight.grad().to_vector<float>();

  weight.zero_grad();
  DeferredWeightGradients deferred({weight});
  part_backward(batch, 0, weight, &deferred);
  deferred.backward_weights();
  CHECK(weight.grad().to_vector<float>() == immediate);
}

TEST_CASE("deferred weight gradients: the weights of some parts alone, the other parts' rows kept for later") {
  Generator generator(909);
  const std::int64_t in = 6, out = 4;
  const Batch batch = random_batch({3, 5, 2}, in, out, generator);
  const Tensor weight = weight_leaf(in, out, generator);
  // Part 1 alone, immediately: the product its pass would have computed.
  part_backward(batch, 1, weight, nullptr);
  const std::vector<float> part_one = weight.grad().to_vector<float>();
  weight.zero_grad();

  DeferredWeightGradients deferred({weight});
  for (std::size_t p = 0; p < 3; ++p) part_backward(batch, p, weight, &deferred);
  deferred.backward_weights({1});
  CHECK(weight.grad().to_vector<float>() == part_one);
  CHECK(deferred.bytes() == static_cast<std::size_t>((3 + 2) * (in + out)) * sizeof(float));
  deferred.backward_weights({7});  // no rows of part 7: nothing happens
  CHECK(weight.grad().to_vector<float>() == part_one);
  deferred.backward_weights({2, 0});
  CHECK(deferred.weights() == 0);
  check_against_float64(weight.grad(), batch, in, out);
}

TEST_CASE("deferred weight gradients: the sum follows the parts' order, not the order they were recorded in") {
  Generator generator(903);
  const Batch batch = random_batch({5, 2, 13}, 7, 3, generator);
  const Tensor weight = weight_leaf(7, 3, generator);
  std::vector<std::vector<float>> results;
  for (const std::vector<std::size_t>& order : {std::vector<std::size_t>{0, 1, 2}, {2, 0, 1}, {1, 2, 0}}) {
    weight.zero_grad();
    DeferredWeightGradients deferred({weight});
    for (const std::size_t p : order) part_backward(batch, p, weight, &deferred);
    deferred.backward_weights();
    results.push_back(weight.grad().to_vector<float>());
  }
  CHECK(results[1] == results[0]);
  CHECK(results[2] == results[0]);
}

TEST_CASE("deferred weight gradients: the input's and the bias's gradients flow at once, the weight's hooks run once, "
          "with the weights") {
  Generator generator(904);
  const Tensor weight = weight_leaf(5, 3, generator);
  Tensor bias = uniform_tensor({3}, generator);
  bias.set_requires_grad(true);
  int weight_hooks = 0;
  weight.register_grad_hook([&](const Tensor&) { ++weight_hooks; });

  DeferredWeightGradients deferred({weight, bias});
  std::vector<Tensor> inputs;
  for (std::size_t p = 0; p < 3; ++p) {
    Tensor x = uniform_tensor({2, 5}, generator);
    x.set_requires_grad(true);
    inputs.push_back(x);
    deferred.backward_inputs(sum(layers::dense(x, weight, bias)), Tensor(), p);
    CHECK(x.grad().defined());
    CHECK(bias.grad().defined());
  }
  // dBias is the rows of ones summed: 2 per part.
  CHECK(bias.grad().to_vector<float>() == std::vector<float>{6.0f, 6.0f, 6.0f});
  CHECK_FALSE(weight.grad().defined());
  CHECK(weight_hooks == 0);
  deferred.backward_weights();
  CHECK(weight_hooks == 1);
  // dW[i][o] is the sum of every input's column i.
  std::vector<float> column_sums(5, 0.0f);
  for (const Tensor& x : inputs) {
    const std::vector<float> v = x.to_vector<float>();
    for (std::size_t k = 0; k < v.size(); ++k) column_sums[k % 5] += v[k];
  }
  const std::vector<float> grad = weight.grad().to_vector<float>();
  for (std::size_t i = 0; i < 5; ++i) {
    for (std::size_t o = 0; o < 3; ++o) CHECK(grad[i * 3 + o] == doctest::Approx(column_sums[i]).epsilon(1e-6));
  }
}

TEST_CASE("deferred weight gradients: only a listed 2-D leaf is deferred, and only in a pass of backward_inputs") {
  Generator generator(905);
  const Tensor weight = weight_leaf(4, 3, generator);
  const Tensor x = uniform_tensor({6, 4}, generator);
  DeferredWeightGradients deferred({weight});

  SUBCASE("a plain backward computes the weight gradient at once") {
    matmul(x, weight).backward(ones({6, 3}));
    CHECK(weight.grad().defined());
    CHECK(deferred.weights() == 0);
  }
  SUBCASE("a weight computed from a leaf (not a leaf) gets its gradient through its op at once") {
    deferred.backward_inputs(matmul(x, weight * 2.0f), ones({6, 3}), 0);
    CHECK(weight.grad().defined());
    CHECK(deferred.weights() == 0);
  }
  SUBCASE("a 2-D leaf the object was not made for (a pipeline stage's input, say) gets its gradient at once") {
    const Tensor other = weight_leaf(4, 3, generator);
    deferred.backward_inputs(matmul(x, other), ones({6, 3}), 0);
    CHECK(other.grad().defined());
    CHECK(deferred.weights() == 0);
  }
  SUBCASE("a plain backward between passes of backward_inputs defers nothing") {
    deferred.backward_inputs(matmul(x, weight), ones({6, 3}), 0);
    CHECK(deferred.weights() == 1);
    CHECK_FALSE(weight.grad().defined());
    matmul(x, weight).backward(ones({6, 3}));
    CHECK(weight.grad().defined());
    CHECK(deferred.bytes() == 6 * (4 + 3) * sizeof(float));  // the first pass's rows alone
  }
  SUBCASE("a 3-D right operand is not a weight") {
    Tensor batched = uniform_tensor({2, 4, 3}, generator);
    batched.set_requires_grad(true);
    DeferredWeightGradients for_batched({batched});
    for_batched.backward_inputs(matmul(uniform_tensor({2, 6, 4}, generator), batched), ones({2, 6, 3}), 0);
    CHECK(batched.grad().defined());
    CHECK(for_batched.weights() == 0);
  }
  SUBCASE("a 3-D input's batch is folded into rows, as backward folds it") {
    const Tensor x3 = uniform_tensor({2, 3, 4}, generator);
    const Tensor g3 = uniform_tensor({2, 3, 3}, generator);
    matmul(x3, weight).backward(g3);
    const std::vector<float> immediate = weight.grad().to_vector<float>();
    weight.zero_grad();
    deferred.backward_inputs(matmul(x3, weight), g3, 0);
    CHECK(deferred.bytes() == 6 * (4 + 3) * sizeof(float));
    deferred.backward_weights();
    CHECK(weight.grad().to_vector<float>() == immediate);
  }
}

TEST_CASE("deferred weight gradients: a weight used twice in a pass, or also by another op") {
  Generator generator(908);
  const std::int64_t in = 7, out = 3;
  SUBCASE("two products: one GEMM over both products' rows") {
    const Batch batch = random_batch({5, 2}, in, out, generator);
    const Tensor weight = weight_leaf(in, out, generator);
    DeferredWeightGradients deferred({weight});
    const Tensor y0 = matmul(batch.xs[0], weight), y1 = matmul(batch.xs[1], weight);
    deferred.backward_inputs(sum(y0 * batch.gradients[0]) + sum(y1 * batch.gradients[1]), Tensor(), 0);
    CHECK(deferred.bytes() == static_cast<std::size_t>(7 * (in + out)) * sizeof(float));
    deferred.backward_weights();
    check_against_float64(weight.grad(), batch, in, out);
  }
  SUBCASE("a product and another op: the weight accumulates twice, its hooks run twice") {
    const Tensor weight = weight_leaf(in, out, generator);
    int hooks = 0;
    weight.register_grad_hook([&](const Tensor&) { ++hooks; });
    const Tensor x = uniform_tensor({4, in}, generator);
    DeferredWeightGradients deferred({weight});
    deferred.backward_inputs(sum(matmul(x, weight)) + sum(weight), Tensor(), 0);
    CHECK(hooks == 1);  // sum(weight)'s ones, at once
    deferred.backward_weights();
    CHECK(hooks == 2);
    // d/dW of sum(xW) + sum(W): each x column's sum, plus 1.
    const std::vector<float> v = x.to_vector<float>(), grad = weight.grad().to_vector<float>();
    for (std::int64_t i = 0; i < in; ++i) {
      double column = 1.0;
      for (std::int64_t r = 0; r < 4; ++r) column += v[static_cast<std::size_t>(r * in + i)];
      for (std::int64_t o = 0; o < out; ++o) {
        CHECK(grad[static_cast<std::size_t>(i * out + o)] == doctest::Approx(column).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("deferred weight gradients: objects keep apart, on any thread, and a weight gone is skipped") {
  Generator generator(906);
  const Tensor kept = weight_leaf(3, 2, generator);
  {
    // Each pass names its object: none shares state with another, or with
    // the thread it runs on.
    const Tensor x = uniform_tensor({4, 3}, generator);
    DeferredWeightGradients first({kept}), second({kept});
    first.backward_inputs(matmul(x, kept), ones({4, 2}), 0);
    std::thread([&] { second.backward_inputs(matmul(x, kept), ones({4, 2}), 1); }).join();
    CHECK(first.bytes() == 4 * (3 + 2) * sizeof(float));
    CHECK(second.bytes() == first.bytes());
    first.backward_weights();
    const std::vector<float> once = kept.grad().to_vector<float>();
    second.backward_weights();
    std::vector<float> twice = once;
    for (float& value : twice) value *= 2.0f;
    CHECK(kept.grad().to_vector<float>() == twice);
    kept.zero_grad();
  }
  {
    Tensor gone = weight_leaf(3, 2, generator);
    DeferredWeightGradients deferred({gone, kept});
    deferred.backward_inputs(matmul(uniform_tensor({4, 3}, generator), gone), ones({4, 2}), 0);
    deferred.backward_inputs(matmul(uniform_tensor({4, 3}, generator), kept), ones({4, 2}), 0);
    CHECK(deferred.weights() == 2);
    gone = Tensor();
    // The weight that went is skipped, the other still gets its gradient.
    deferred.backward_weights();
    CHECK(deferred.weights() == 0);
    CHECK(deferred.bytes() == 0);
    CHECK(kept.grad().defined());
  }
}

TEST_CASE("deferred weight gradients: parts of no rows add nothing, a weight of no inputs gets an empty gradient") {
  Generator generator(907);
  SUBCASE("only empty parts: zeros of the weight's shape") {
    const Tensor weight = weight_leaf(5, 3, generator);
    DeferredWeightGradients deferred({weight});
    for (std::size_t p = 0; p < 2; ++p) {
      deferred.backward_inputs(matmul(uniform_tensor({0, 5}, generator), weight), uniform_tensor({0, 3}, generator), p);
    }
    deferred.backward_weights();
    CHECK(weight.grad().to_vector<float>() == std::vector<float>(15, 0.0f));
  }
  SUBCASE("an empty part beside a full one") {
    const Batch batch = random_batch({0, 4, 0}, 5, 3, generator);
    const Tensor weight = weight_leaf(5, 3, generator);
    part_backward(batch, 1, weight, nullptr);
    const std::vector<float> immediate = weight.grad().to_vector<float>();
    weight.zero_grad();
    DeferredWeightGradients deferred({weight});
    for (std::size_t p = 0; p < 3; ++p) part_backward(batch, p, weight, &deferred);
    deferred.backward_weights();
    CHECK(weight.grad().to_vector<float>() == immediate);
  }
  SUBCASE("no inputs: an empty inner dimension") {
    const Tensor weight = weight_leaf(0, 3, generator);
    DeferredWeightGradients deferred({weight});
    deferred.backward_inputs(matmul(uniform_tensor({4, 0}, generator), weight), uniform_tensor({4, 3}, generator), 0);
    deferred.backward_weights();
    CHECK(weight.grad().shape() == Shape{0, 3});
  }
}

TEST_CASE("deferred weight gradients: a convolution's weight and bias, the whole batch's backward-weights bit for bit") {
  Generator generator(907);
  // Awkward sizes: odd channels and extents, stride 2 with padding, parts
  // of 3, 1 and 2 images.
  const layers::Conv2dOptions options{.kernel_size = 3, .stride = 2, .padding = 1};
  const std::vector<std::int64_t> part_images{3, 1, 2};
  std::vector<Tensor> xs, gradients;
  for (const std::int64_t images : part_images) {
    xs.push_back(uniform_tensor({images, 3, 9, 7}, generator));
    gradients.push_back(uniform_tensor({images, 5, 5, 4}, generator));
  }
  const auto leaf = [](Tensor t) {
    t.set_requires_grad(true);
    return t;
  };
  const Tensor weight = leaf(uniform_tensor({5, 3, 3, 3}, generator));
  const Tensor bias = leaf(uniform_tensor({5}, generator));
  int weight_hooks = 0, bias_hooks = 0;
  weight.register_grad_hook([&](const Tensor&) { ++weight_hooks; });
  bias.register_grad_hook([&](const Tensor&) { ++bias_hooks; });

  // The reference: one backward over the whole batch, as one process runs it.
  const Tensor whole_weight = leaf(weight.detach().clone()), whole_bias = leaf(bias.detach().clone());
  const Tensor whole_input = leaf(concat(xs));
  layers::conv2d(whole_input, whole_weight, whole_bias, options).backward(concat(gradients));

  DeferredWeightGradients deferred({weight, bias});
  std::vector<Tensor> inputs;
  for (std::size_t p = 0; p < part_images.size(); ++p) {
    inputs.push_back(leaf(xs[p].clone()));
    deferred.backward_inputs(layers::conv2d(inputs.back(), weight, bias, options), gradients[p], p);
    CHECK(inputs.back().grad().defined());  // the input's gradient flows at once
  }
  CHECK_FALSE(weight.grad().defined());
  CHECK_FALSE(bias.grad().defined());
  CHECK(deferred.weights() == 1);
  CHECK(deferred.bytes() == (concat(xs).nbytes() + concat(gradients).nbytes()));

  deferred.backward_weights();
  CHECK(deferred.weights() == 0);
  CHECK(weight_hooks == 1);
  CHECK(bias_hooks == 1);
  CHECK(weight.grad().to_vector<float>() == whole_weight.grad().to_vector<float>());
  CHECK(bias.grad().to_vector<float>() == whole_bias.grad().to_vector<float>());
  CHECK(concat({inputs[0].grad(), inputs[1].grad(), inputs[2].grad()}).to_vector<float>() ==
        whole_input.grad().to_vector<float>());
}

TEST_CASE("deferred weight gradients: a convolution's W per part adds what each part's own backward adds, bit for bit") {
  Generator generator(908);
  const layers::Conv2dOptions options{.kernel_size = 2, .bias = false};
  std::vector<Tensor> xs, gradients;
  for (const std::int64_t images : {2, 3}) {
    xs.push_back(uniform_tensor({images, 2, 5, 6}, generator));
    gradients.push_back(uniform_tensor({images, 4, 4, 5}, generator));
  }
  Tensor weight = uniform_tensor({4, 2, 2, 2}, generator);
  weight.set_requires_grad(true);
  Tensor plain = weight.detach().clone();
  plain.set_requires_grad(true);
  DeferredWeightGradients deferred({weight});
  for (std::size_t p = 0; p < xs.size(); ++p) {
    layers::conv2d(xs[p], plain, Tensor(), options).backward(gradients[p]);
    deferred.backward_inputs(layers::conv2d(xs[p], weight, Tensor(), options), gradients[p], p);
  }
  // The schedule's W of each part in turn, as zero-bubble schedules run them.
  deferred.backward_weights({0});
  CHECK(deferred.weights() == 1);
  deferred.backward_weights({1});
  CHECK(weight.grad().to_vector<float>() == plain.grad().to_vector<float>());
}
