// Times every layer of the Keras MNIST CNN at its real shapes (batch 128;
// max pooling also on the channel-blocked input the step hands it),
// forward and forward + backward, the whole training step (forward,
// backward, SGD update) and the optimizers' updates alone, for each thread
// count. GEMM-based layers show their GFLOP/s beside a square 1024 GEMM
// timed in the same run. The PyTorch peer is bench/torch_cnn_step.py;
// bench/compare_cnn_step.sh runs both side by side.
//
//   bench/ddl_bench_layers [--threads 1,2] [--reps 10] [--batch 128] [--step-only] [--winograd-lanes 8|16]
#include <ddl/ddl.hpp>
#include <ddl/layers/activation.hpp>
#include <ddl/layers/conv2d.hpp>
#include <ddl/layers/conv2d_winograd.hpp>
#include <ddl/layers/dense.hpp>
#include <ddl/layers/dropout.hpp>
#include <ddl/layers/loss.hpp>
#include <ddl/layers/pool2d.hpp>
#include <ddl/models/zoo.hpp>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "timing.hpp"

using namespace ddl;
using bench::Timing;
using bench::time_it;

namespace {

struct LayerCase {
  std::string name;
  std::shared_ptr<layers::Module> layer;
  Shape input;
  double forward_flops;  // 0 for layers that are not GEMM-bound
  bool input_needs_grad;
  // The input as the step hands it over, in oneDNN's channel-blocked
  // layout (a convolution's output), where the layer reads that as it is.
  bool blocked_input = false;
};

// x as a convolution leaves it, in oneDNN's layout: through a 1x1 one
// whose weight is the identity (the values unchanged, their order not).
Tensor as_a_convolution_leaves_it(const Tensor& x) {
  const NoGradGuard no_grad;
  const std::int64_t channels = x.size(1);
  std::vector<float> identity(static_cast<std::size_t>(channels * channels));
  for (std::int64_t c = 0; c < channels; ++c) identity[static_cast<std::size_t>(c * channels + c)] = 1.0f;
  return layers::conv2d(x, from_vector(identity, {channels, channels, 1, 1}), Tensor(), {.kernel_size = 1});
}

void print_row(const std::string& what, int threads, const Timing& t, double flops, double gemm_gflops) {
  fmt::print("{:<34} {:>7} {:>9.2f} {:>9.2f}", what, threads, t.median_ms, t.best_ms);
  if (flops > 0.0) {
    const double gflops = flops / (t.median_ms * 1e-3) * 1e-9;
    fmt::print(" {:>9.1f} {:>8.0f}%", gflops, 100.0 * gflops / gemm_gflops);
  }
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-layer and whole-step CPU timings of the Keras MNIST CNN"};
  bench::Options options;
  bench::add_options(app, options);
  bool step_only = false;
  app.add_flag("--step-only", step_only, "time only the training step (for profiling and the peer comparisons)");
  int winograd_lanes = 0;
  app.add_option("--winograd-lanes", winograd_lanes,
                 "channels ddl's Winograd transforms take at once, 8 or 16 (default: the build's widest register; "
                 "they run under DDL_CPU_CONV=ddl-winograd, or auto or winograd where oneDNN has no Winograd kernel)")
      ->check(CLI::IsMember({8, 16}));
  CLI11_PARSE(app, argc, argv);
  cpu_backend::winograd::set_transform_lanes(winograd_lanes);
  const int reps = options.reps;
  const std::int64_t batch = options.batch;

  Generator generator(3);
  const double n = static_cast<double>(batch);
  const std::vector<LayerCase> cases{
      {"conv 1->32 28x28",
       std::make_shared<layers::Conv2d>(1, 32, layers::Conv2dOptions{}, &generator),
       {batch, 1, 28, 28},
       2.0 * n * 32 * 9 * 26 * 26,
       false},
      {"relu 32x26x26", std::make_shared<layers::ReLU>(), {batch, 32, 26, 26}, 0.0, true},
      {"conv 32->64 26x26",
       std::make_shared<layers::Conv2d>(32, 64, layers::Conv2dOptions{}, &generator),
       {batch, 32, 26, 26},
       2.0 * n * 64 * 32 * 9 * 24 * 24,
       true},
      {"maxpool 2 64x24x24",
       std::make_shared<layers::MaxPool2d>(layers::Pool2dOptions{}),
       {batch, 64, 24, 24},
       0.0,
       true},
      {"maxpool 2 64x24x24 blocked",
       std::make_shared<layers::MaxPool2d>(layers::Pool2dOptions{}),
       {batch, 64, 24, 24},
       0.0,
       true,
       true},
      {"dropout 0.25 64x12x12", std::make_shared<layers::Dropout>(0.25f, &generator), {batch, 64, 12, 12}, 0.0, true},
      {"dense 9216->128",
       std::make_shared<layers::Dense>(9216, 128, true, &generator),
       {batch, 9216},
       2.0 * n * 9216 * 128,
       true},
      {"dense 128->10",
       std::make_shared<layers::Dense>(128, 10, true, &generator),
       {batch, 128},
       2.0 * n * 128 * 10,
       true},
  };

  fmt::print("ddl {} CPU, batch {}; ms = median (best) of {} runs; fwd+bwd GFLOP/s count backward as 2x forward\n\n",
             build::kVersion, batch, reps);
  fmt::print("{:<34} {:>7} {:>9} {:>9} {:>9} {:>9}\n", "case", "threads", "ms", "best ms", "GFLOP/s", "of GEMM");
  for (const int threads : options.thread_counts) {
    set_num_threads(threads);
    const bench::GemmRate gemm = bench::measure_gemm(reps, generator);
    const double gemm_gflops = gemm.gflops;
    print_row("GEMM 1024^3", threads, gemm.timing, 2.0 * 1024 * 1024 * 1024, gemm_gflops);

    for (const LayerCase& c : step_only ? std::vector<LayerCase>{} : cases) {
      Tensor x = uniform(c.input, -1.0f, 1.0f, {}, &generator);
      if (c.blocked_input) x = as_a_convolution_leaves_it(x);
      if (c.input_needs_grad) x.set_requires_grad();
      const Timing forward = time_it(
          [&] {
            const NoGradGuard no_grad;
            (*c.layer)(x);
          },
          reps);
      print_row(c.name + " forward", threads, forward, c.forward_flops, gemm_gflops);
      const Tensor probe = (*c.layer)(x);
      const Tensor upstream = uniform(probe.shape(), -1.0f, 1.0f, {}, &generator);
      const Timing both = time_it(
          [&] {
            c.layer->zero_grad();
            x.zero_grad();
            (*c.layer)(x).backward(upstream);
          },
          reps);
      print_row(c.name + " fwd+bwd", threads, both, c.forward_flops * (c.input_needs_grad ? 3 : 2), gemm_gflops);
    }

    // The whole step as a training loop runs it: dropout on, cross-entropy,
    // SGD (lr 0.01) applied to every parameter in place.
    const auto model = models::mnist_cnn(&generator);
    const Tensor images = uniform({batch, 1, 28, 28}, 0.0f, 1.0f, {}, &generator);
    std::vector<std::int64_t> label_values(static_cast<std::size_t>(batch));
    for (std::size_t i = 0; i < label_values.size(); ++i) label_values[i] = static_cast<std::int64_t>(i % 10);
    const Tensor labels = from_vector(label_values, {batch});
    const Timing step = time_it(
        [&] {
          model->zero_grad();
          layers::cross_entropy((*model)(images), labels).backward();
          const NoGradGuard no_grad;
          for (const Tensor& p : model->parameters()) p.copy_from(p - p.grad() * 0.01f);
        },
        reps);
    print_row("training step", threads, step, 0.0, gemm_gflops);
    fmt::print("{:<34} {:>7} {:>9.0f} samples/s\n", "", threads, 1e3 * n / step.median_ms);

    if (step_only) continue;
    // The optimizers' updates over the same parameters (fused elementwise
    // kernels, bound by memory).
    const std::vector<std::pair<std::string, std::shared_ptr<optim::Optimizer>>> optimizers{
        {"SGD momentum", std::make_shared<optim::SGD>(model->parameters(), optim::SgdOptions{.momentum = 0.9})},
        {"Adadelta", std::make_shared<optim::Adadelta>(model->parameters())},
        {"Adam", std::make_shared<optim::Adam>(model->parameters())}};
    for (const auto& [name, optimizer] : optimizers) {
      const Timing update = time_it([&] { optimizer->step(); }, reps);
      print_row("update " + name, threads, update, 0.0, gemm_gflops);
    }
    fmt::print("\n");
  }
  return 0;
}
