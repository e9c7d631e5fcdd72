// The Dense layers' products at the bundled models' shapes (wide_mlp:
// 784 -> 4096, 4096 -> 4096, 4096 -> 10; mnist_cnn: 9216 -> 128, 128 -> 10),
// batch 128, no bias: the forward product x·W alone, and forward + backward
// (x·W, g·Wᵀ and xᵀ·g; without g·Wᵀ for wide_mlp's first layer, whose input
// needs no gradient in training), for each thread count, with GFLOP/s. The PyTorch
// peer is bench/torch_dense.py (same output); bench/compare_dense.sh runs
// both side by side.
//
//   bench/ddl_bench_dense [--threads 1,2] [--reps 10] [--batch 128]
#include <ddl/ddl.hpp>
#include <ddl/layers/dense.hpp>

#include <fmt/format.h>

#include <array>
#include <cstdint>

#include "timing.hpp"

using namespace ddl;

int main(int argc, char** argv) {
  CLI::App app{"The Dense layers' products of wide_mlp and mnist_cnn, forward and forward + backward"};
  bench::Options options;
  bench::add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  struct Layer {
    std::int64_t in, out;
    bool input_needs_grad;
  };
  constexpr std::array<Layer, 5> kLayers{
      {{784, 4096, false}, {4096, 4096, true}, {4096, 10, true}, {9216, 128, true}, {128, 10, true}}};

  fmt::print("ddl {} CPU dense products, batch {}; ms = median of {} runs\n", build::kVersion, options.batch,
             options.reps);
  fmt::print("{:<16} {:<8} {:>7} {:>9} {:>9}\n", "layer", "pass", "threads", "ms", "GFLOP/s");
  Generator generator(5);
  for (const int threads : options.thread_counts) {
    set_num_threads(threads);
    for (const auto& [in, out, input_needs_grad] : kLayers) {
      const Tensor w = uniform({in, out}, -0.05f, 0.05f, {}, &generator).set_requires_grad();
      const Tensor x = uniform({options.batch, in}, -1.0f, 1.0f, {}, &generator).set_requires_grad(input_needs_grad);
      const Tensor g = uniform({options.batch, out}, -1.0f, 1.0f, {}, &generator);
      const double flops = 2.0 * static_cast<double>(options.batch * in * out);
      const std::string layer = fmt::format("{}->{}", in, out);
      const auto report = [&](const char* pass, const bench::Timing& t, double pass_flops) {
        fmt::print("{:<16} {:<8} {:>7} {:>9.3f} {:>9.1f}\n", layer, pass, threads, t.median_ms,
                   pass_flops / (t.median_ms * 1e-3) * 1e-9);
      };
      report("forward",
             bench::time_it(
                 [&] {
                   const NoGradGuard no_grad;
                   (void)layers::dense(x, w, {});
                 },
                 options.reps),
             flops);
      report("fwd+bwd",
             bench::time_it(
                 [&] {
                   w.zero_grad();
                   x.zero_grad();
                   layers::dense(x, w, {}).backward(g);
                 },
                 options.reps),
             (input_needs_grad ? 3 : 2) * flops);
    }
  }
  return 0;
}
