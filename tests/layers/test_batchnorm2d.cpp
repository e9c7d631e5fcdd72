// BatchNorm2d (layers/batchnorm2d.cpp): the forward pass against a reference
// computed here, the running statistics (PyTorch's convention), evaluation
// mode, gradients by finite differences in both modes, the module's state,
// bad inputs, and (where a GPU exists) cuDNN against the CPU.
#include <doctest/doctest.h>

#include <ddl/ddl.hpp>
#include <ddl/layers/batchnorm2d.hpp>

#include <cmath>
#include <random>

#include "support/gradcheck.hpp"
#include "support/skip.hpp"
#include "support/test_data.hpp"

using namespace ddl;
using ddl::test::all_close;
using ddl::test::gradcheck;
using ddl::test::throws_error_mentioning;

namespace {

// Per-channel mean and biased variance of an NCHW tensor, in double.
struct ChannelStatistics {
  std::vector<double> mean, variance;
  std::int64_t count = 0;  // values per channel
};

ChannelStatistics statistics_of(const Tensor& x) {
  const auto values = x.to_vector<float>();
  const std::int64_t n = x.size(0), c = x.size(1), plane = x.size(2) * x.size(3);
  ChannelStatistics s{std::vector<double>(static_cast<std::size_t>(c)),
                      std::vector<double>(static_cast<std::size_t>(c)), n * plane};
  for (std::int64_t ch = 0; ch < c; ++ch) {
    double total = 0.0, squares = 0.0;
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t i = 0; i < plane; ++i) total += values[static_cast<std::size_t>((b * c + ch) * plane + i)];
    }
    const double mean = total / static_cast<double>(s.count);
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t i = 0; i < plane; ++i) {
        const double d = values[static_cast<std::size_t>((b * c + ch) * plane + i)] - mean;
        squares += d * d;
      }
    }
    s.mean[static_cast<std::size_t>(ch)] = mean;
    s.variance[static_cast<std::size_t>(ch)] = squares / static_cast<double>(s.count);
  }
  return s;
}

// y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c].
std::vector<float> reference_normalise(const Tensor& x, const std::vector<double>& mean,
                                       const std::vector<double>& variance, const std::vector<float>& gamma,
                                       const std::vector<float>& beta, double eps) {
  const auto values = x.to_vector<float>();
  const std::int64_t c = x.size(1), plane = x.size(2) * x.size(3);
  std::vector<float> y(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto ch = static_cast<std::size_t>((static_cast<std::int64_t>(i) / plane) % c);
    y[i] = static_cast<float>((values[i] - mean[ch]) / std::sqrt(variance[ch] + eps) * gamma[ch] + beta[ch]);
  }
  return y;
}

std::vector<double> to_double(const Tensor& t) {
  const auto v = t.to_vector<float>();
  return {v.begin(), v.end()};
}

struct BatchNormInputs {
  Tensor x, gamma, beta, running_mean, running_var;
};

BatchNormInputs random_inputs(const Shape& shape, Generator& generator) {
  const Shape channels{shape[1]};
  return {test::uniform_tensor(shape, generator, -2.0f, 2.0f), test::uniform_tensor(channels, generator, 0.5f, 1.5f),
          test::uniform_tensor(channels, generator), test::uniform_tensor(channels, generator),
          test::positive_tensor(channels, generator)};
}

// Random NCHW shapes with at least 6 values per channel (so the batch
// variance is not a near-zero accident) and at most 150 elements.
Shape random_bn_shape(std::mt19937& rng) {
  for (;;) {
    const Shape shape = test::random_shape(rng, 4, 150);
    if (shape[0] * shape[2] * shape[3] >= 6) return shape;
  }
}

}  // namespace

TEST_CASE("batch_norm2d in training normalises with the batch mean and biased variance") {
  Generator generator(31);
  for (const Shape& shape : {Shape{7, 3, 5, 3}, Shape{1, 4, 3, 7}, Shape{13, 2, 1, 1}}) {
    CAPTURE(shape);
    const BatchNormInputs in = random_inputs(shape, generator);
    const ChannelStatistics s = statistics_of(in.x);
    const Tensor y = layers::batch_norm2d(in.x, in.gamma, in.beta, in.running_mean, in.running_var, true);
    CHECK(all_close(
        y, reference_normalise(in.x, s.mean, s.variance, in.gamma.to_vector<float>(), in.beta.to_vector<float>(), 1e-5),
        1e-5, 1e-5));
  }
}

TEST_CASE("batch_norm2d in evaluation normalises with the running statistics and leaves them unchanged") {
  Generator generator(32);
  const BatchNormInputs in = random_inputs({5, 3, 4, 3}, generator);
  const auto mean_before = in.running_mean.to_vector<float>(), var_before = in.running_var.to_vector<float>();
  const Tensor y = layers::batch_norm2d(in.x, in.gamma, in.beta, in.running_mean, in.running_var, false, {.eps = 1e-3});
  CHECK(all_close(y,
                  reference_normalise(in.x, to_double(in.running_mean), to_double(in.running_var),
                                      in.gamma.to_vector<float>(), in.beta.to_vector<float>(), 1e-3),
                  1e-5, 1e-5));
  CHECK(all_close(in.running_mean, mean_before, 0, 0));
  CHECK(all_close(in.running_var, var_before, 0, 0));
}

TEST_CASE("BatchNorm2d updates its running statistics with momentum and the unbiased variance") {
  Generator generator(33);
  const double momentum = 0.25;
  layers::BatchNorm2d layer(3, {.momentum = momentum});
  std::vector<double> mean(3, 0.0), variance(3, 1.0);  // the initial buffers
  for (int step = 1; step <= 2; ++step) {
    CAPTURE(step);
    const Tensor x = test::uniform_tensor({4, 3, 3, 5}, generator, -1.0f, 3.0f);
    layer(x);
    const ChannelStatistics s = statistics_of(x);
    const double bessel = static_cast<double>(s.count) / static_cast<double>(s.count - 1);
    for (std::size_t c = 0; c < 3; ++c) {
      mean[c] = (1.0 - momentum) * mean[c] + momentum * s.mean[c];
      variance[c] = (1.0 - momentum) * variance[c] + momentum * s.variance[c] * bessel;
    }
    CHECK(all_close(layer.running_mean(), {mean.begin(), mean.end()}, 1e-6, 1e-6));
    CHECK(all_close(layer.running_var(), {variance.begin(), variance.end()}, 1e-6, 1e-6));
  }
}

TEST_CASE("BatchNorm2d in eval mode uses the running statistics its training steps left") {
  Generator generator(34);
  layers::BatchNorm2d layer(2);
  layer(test::uniform_tensor({6, 2, 3, 3}, generator, 1.0f, 4.0f));
  const auto running_mean = to_double(layer.running_mean()), running_var = to_double(layer.running_var());
  layer.eval();
  const Tensor x = test::uniform_tensor({3, 2, 5, 1}, generator);
  CHECK(
      all_close(layer(x), reference_normalise(x, running_mean, running_var, {1.f, 1.f}, {0.f, 0.f}, 1e-5), 1e-5, 1e-5));
  CHECK(all_close(layer.running_mean(), {running_mean.begin(), running_mean.end()}, 0, 0));
}

TEST_CASE("batch_norm2d training gradients (input, gamma, beta) match finite differences on random shapes") {
  Generator generator(35);
  std::mt19937 rng(35);
  for (int trial = 0; trial < 5; ++trial) {
    const Shape shape = random_bn_shape(rng);
    CAPTURE(shape);
    const BatchNormInputs in = random_inputs(shape, generator);
    const auto f = [&in](const std::vector<Tensor>& t) {
      return layers::batch_norm2d(t[0], t[1], t[2], in.running_mean, in.running_var, true);
    };
    CHECK(gradcheck(f, {in.x, in.gamma, in.beta}));
  }
}

TEST_CASE("batch_norm2d evaluation gradients (input, gamma, beta) match finite differences on random shapes") {
  Generator generator(36);
  std::mt19937 rng(36);
  for (int trial = 0; trial < 5; ++trial) {
    const Shape shape = test::random_shape(rng, 4, 150);
    CAPTURE(shape);
    const BatchNormInputs in = random_inputs(shape, generator);
    const auto f = [&in](const std::vector<Tensor>& t) {
      return layers::batch_norm2d(t[0], t[1], t[2], in.running_mean, in.running_var, false);
    };
    CHECK(gradcheck(f, {in.x, in.gamma, in.beta}));
  }
}

TEST_CASE("batch_norm2d training equals the formula composed from core ops, on a tensor large enough to thread") {
  // 16 channels x 2048 values: past the CPU loops' parallel threshold.
  Generator generator(38);
  const BatchNormInputs in = random_inputs({8, 16, 16, 16}, generator);
  const Tensor upstream = test::uniform_tensor(in.x.shape(), generator);
  const auto per_channel_mean = [](const Tensor& t) { return mean(mean(mean(t, 0, true), 2, true), 3, true); };

  std::vector<Tensor> leaves{in.x.clone(), in.gamma.clone(), in.beta.clone()};
  for (Tensor& t : leaves) t.set_requires_grad();
  layers::batch_norm2d(leaves[0], leaves[1], leaves[2], in.running_mean, in.running_var, true).backward(upstream);

  std::vector<Tensor> composed{in.x.clone(), in.gamma.clone(), in.beta.clone()};
  for (Tensor& t : composed) t.set_requires_grad();
  const Shape channel{1, 16, 1, 1};
  const Tensor centred = composed[0] - per_channel_mean(composed[0]);
  const Tensor x_hat = centred / sqrt(per_channel_mean(centred * centred) + 1e-5f);
  const Tensor y = x_hat * composed[1].reshape(channel) + composed[2].reshape(channel);
  y.backward(upstream);

  const BatchNormInputs fresh = random_inputs({1, 16, 1, 1}, generator);  // unused running buffers
  CHECK(all_close(layers::batch_norm2d(in.x, in.gamma, in.beta, fresh.running_mean, fresh.running_var, true), y, 1e-5,
                  1e-5));
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    CAPTURE(i);
    CHECK(all_close(leaves[i].grad(), composed[i].grad(), 1e-4, 1e-4));
  }
}

TEST_CASE("BatchNorm2d starts from gamma 1, beta 0, mean 0, variance 1 and names them") {
  layers::BatchNorm2d layer(4, {.eps = 1e-3, .momentum = 0.01});
  CHECK(layer.type_name() == "BatchNorm2d");
  CHECK(layer.describe() == "BatchNorm2d(4, eps=0.001, momentum=0.01)");
  const auto parameters = layer.named_parameters();
  REQUIRE(parameters.size() == 2);
  CHECK(parameters[0].first == "weight");
  CHECK(parameters[1].first == "bias");
  CHECK(all_close(layer.weight(), std::vector<float>(4, 1.f), 0, 0));
  CHECK(all_close(layer.bias(), std::vector<float>(4, 0.f), 0, 0));
  const auto buffers = layer.named_buffers();
  REQUIRE(buffers.size() == 2);
  CHECK(buffers[0].first == "running_mean");
  CHECK(buffers[1].first == "running_var");
  CHECK(all_close(layer.running_mean(), std::vector<float>(4, 0.f), 0, 0));
  CHECK(all_close(layer.running_var(), std::vector<float>(4, 1.f), 0, 0));
  CHECK(layer.parameter_count() == 8);
}

TEST_CASE("batch norm rejects an input that is not 4-D") {
  CHECK(throws_error_mentioning([] { layers::BatchNorm2d(3)(zeros({2, 3, 4})); }, {"BatchNorm2d", "4-D", "[2, 3, 4]"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::batch_norm2d(zeros({2, 3}), ones({3}), zeros({3}), zeros({3}), ones({3}), true);
      },
      {"batch_norm2d", "4-D", "[2, 3]"}));
}

TEST_CASE("batch norm rejects an input whose channel count differs from num_features") {
  CHECK(throws_error_mentioning(
      [] {
        layers::BatchNorm2d(4)(zeros({2, 3, 5, 5}));
      },
      {"BatchNorm2d(4", "[2, 3, 5, 5]", "3 channels", "expected 4"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::batch_norm2d(zeros({2, 3, 5, 5}), ones({4}), zeros({4}), zeros({4}), ones({4}), false);
      },
      {"batch_norm2d", "[2, 3, 5, 5]", "3 channels", "weight", "[4]"}));
}

TEST_CASE("batch norm in training rejects a batch with one value per channel") {
  CHECK(throws_error_mentioning(
      [] {
        layers::BatchNorm2d(3)(zeros({1, 3, 1, 1}));
      },
      {"batch_norm2d", "more than one value per channel", "[1, 3, 1, 1]"}));
}

TEST_CASE("batch norm rejects a non-positive eps, a momentum outside 0..1 or no features") {
  CHECK(throws_error_mentioning([] { layers::BatchNorm2d(3, {.eps = 0.0}); }, {"BatchNorm2d", "eps", "0"}));
  CHECK(throws_error_mentioning([] { layers::BatchNorm2d(3, {.momentum = 1.5}); }, {"BatchNorm2d", "momentum", "1.5"}));
  CHECK(throws_error_mentioning([] { layers::BatchNorm2d(0); }, {"BatchNorm2d", "num_features", "0"}));
  CHECK(throws_error_mentioning(
      [] {
        layers::batch_norm2d(zeros({2, 3, 2, 2}), ones({3}), zeros({3}), zeros({3}), ones({3}), true,
                             {.momentum = -0.5});
      },
      {"batch_norm2d", "momentum", "-0.5"}));
}

TEST_CASE("batch norm on every CUDA device matches the CPU, forward, backward and running statistics" *
          doctest::test_suite("cuda")) {
  if (!cuda_available()) return test::skip("no CUDA device");
  Generator generator(37);
  for (const bool training : {true, false}) {
    CAPTURE(training);
    const BatchNormInputs in = random_inputs({7, 3, 5, 3}, generator);
    const Tensor upstream = test::uniform_tensor(in.x.shape(), generator);
    std::vector<Tensor> cpu_leaves{in.x.clone(), in.gamma.clone(), in.beta.clone()};
    for (Tensor& t : cpu_leaves) t.set_requires_grad();
    const Tensor cpu_mean = in.running_mean.clone(), cpu_var = in.running_var.clone();
    const Tensor y_cpu = layers::batch_norm2d(cpu_leaves[0], cpu_leaves[1], cpu_leaves[2], cpu_mean, cpu_var, training);
    y_cpu.backward(upstream);
    for (int index = 0; index < device_count(DeviceType::CUDA); ++index) {
      const Device gpu = cuda(index);
      std::vector<Tensor> leaves{in.x.to(gpu), in.gamma.to(gpu), in.beta.to(gpu)};
      for (Tensor& t : leaves) t.set_requires_grad();
      const Tensor mean = in.running_mean.to(gpu), var = in.running_var.to(gpu);
      const Tensor y = layers::batch_norm2d(leaves[0], leaves[1], leaves[2], mean, var, training);
      y.backward(upstream.to(gpu));
      CHECK(all_close(y.to(cpu()), y_cpu, 1e-4, 1e-4));
      CHECK(all_close(mean.to(cpu()), cpu_mean, 1e-5, 1e-5));
      CHECK(all_close(var.to(cpu()), cpu_var, 1e-5, 1e-5));
      for (std::size_t i = 0; i < leaves.size(); ++i) {
        CHECK(all_close(leaves[i].grad().to(cpu()), cpu_leaves[i].grad(), 1e-4, 1e-4));
      }
    }
  }
}
