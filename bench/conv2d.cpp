// Times Conv2d on the CPU at the Keras MNIST CNN's real shapes (batch 128:
// conv 1->32 on 28x28, conv 32->64 on 26x26, 3x3 kernels), forward and
// forward + backward, for each thread count, and prints the achieved
// GFLOP/s beside a square 1024 GEMM's (through ddl::matmul) timed in
// the same run, so the numbers say how close the convolution gets to the
// machine's GEMM.
//
//   bench/ddl_bench_conv2d [--threads 1,2] [--reps 20] [--batch 128]
#include <ddl/ddl.hpp>
#include <ddl/layers/conv2d.hpp>

#include "timing.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

using namespace ddl;

namespace {

using bench::Timing;
using bench::time_it;

struct ConvShape {
  std::string name;
  std::int64_t in_channels, out_channels, size;  // square images
  bool input_needs_grad;  // false for a network's first layer: no backward-data
};

// 2 N K C kh kw OH OW per pass.
double forward_flops(const ConvShape& s, std::int64_t batch) {
  const std::int64_t out = s.size - 2;
  return 2.0 * static_cast<double>(batch) * s.out_channels * s.in_channels * 9 * out * out;
}

void print_row(const std::string& what, int threads, const Timing& t, double flops, double gemm_gflops) {
  const double gflops = flops / (t.median_ms * 1e-3) * 1e-9;
  fmt::print("{:<34} {:>7} {:>10.2f} {:>10.2f} {:>9.1f} {:>9.0f}%\n", what, threads, t.median_ms, t.best_ms, gflops,
             100.0 * gflops / gemm_gflops);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Conv2d CPU benchmark at the Keras MNIST CNN's shapes"};
  bench::Options options;
  options.reps = 20;
  bench::add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  const int reps = options.reps;
  const std::int64_t batch = options.batch;

  const std::vector<ConvShape> shapes{{"conv 1->32, 28x28", 1, 32, 28, false}, {"conv 32->64, 26x26", 32, 64, 26, true}};
  Generator generator(7);
  fmt::print("batch {}, 3x3 kernels, stride 1, no padding; ms = median (best) of {} runs\n", batch, reps);
  fmt::print("fwd+bwd FLOPs = forward x (1 + 1 for backward-filter + 1 for backward-data where the input needs "
             "its gradient)\n\n");
  fmt::print("{:<34} {:>7} {:>10} {:>10} {:>9} {:>10}\n", "case", "threads", "ms", "best ms", "GFLOP/s", "of GEMM");

  for (const int threads : options.thread_counts) {
    set_num_threads(threads);
    const bench::GemmRate gemm = bench::measure_gemm(reps, generator);
    const double gemm_gflops = gemm.gflops;
    fmt::print("{:<34} {:>7} {:>10.2f} {:>10.2f} {:>9.1f} {:>10}\n", "GEMM 1024^3", threads,
               gemm.timing.median_ms, gemm.timing.best_ms, gemm_gflops, "100%");

    double total_ms = 0.0;
    for (const ConvShape& s : shapes) {
      layers::Conv2d conv(s.in_channels, s.out_channels, {}, &generator);
      Tensor x = uniform({batch, s.in_channels, s.size, s.size}, -1.0f, 1.0f, {}, &generator);
      if (s.input_needs_grad) x.set_requires_grad();
      const Tensor grad = uniform({batch, s.out_channels, s.size - 2, s.size - 2}, -1.0f, 1.0f, {}, &generator);
      const double flops = forward_flops(s, batch);

      const Timing forward = time_it(
          [&] {
            const NoGradGuard no_grad;
            conv(x);
          },
          reps);
      print_row(s.name + " forward", threads, forward, flops, gemm_gflops);

      const Timing both = time_it(
          [&] {
            conv.zero_grad();
            x.zero_grad();
            conv(x).backward(grad);
          },
          reps);
      print_row(s.name + " forward+backward", threads, both, flops * (s.input_needs_grad ? 3 : 2), gemm_gflops);
      total_ms += both.median_ms;
    }
    fmt::print("{:<34} {:>7} {:>10.2f}\n\n", "both convs forward+backward", threads, total_ms);
  }
  return 0;
}
